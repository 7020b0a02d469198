// Reads requests from stdin, one per line, and answers each with lines `id time_ms node seq` as
// @sapphire/snowflake (the version package-lock.json pins) computes them; tests/it/uid_reference.rs
// compares them with imid's UID.DECODE. Our code driving theirs: the bit layouts come from the
// library alone.
//   gen <layout> <node> <count>   IDs the library generates for machine `node`, decomposed by it
//   dec <layout> <id>             the library's decomposition of `id`
// <layout>: twitter or discord. A Snowflake's 10-bit machine field is the library's workerId
// (upper 5 bits) and processId (lower 5 bits); imid reads the two as one node number.
'use strict';
const { TwitterSnowflake, DiscordSnowflake } = require('@sapphire/snowflake');
const libs = { twitter: TwitterSnowflake, discord: DiscordSnowflake };

function line(lib, id) {
  const d = lib.deconstruct(id);
  const node = (d.workerId << 5n) | d.processId;
  return `${d.id} ${d.timestamp} ${node} ${d.increment}`;
}

const out = [];
const input = require('fs').readFileSync(0, 'utf8');
for (const req of input.split('\n')) {
  const w = req.trim().split(/\s+/);
  if (w[0] === '') continue;
  const lib = libs[w[1]];
  if (!lib) throw new Error(`unknown layout ${w[1]}`);
  if (w[0] === 'gen') {
    const node = BigInt(w[2]);
    for (let i = 0; i < Number(w[3]); i++) {
      out.push(line(lib, lib.generate({ workerId: node >> 5n, processId: node & 31n })));
    }
  } else if (w[0] === 'dec') {
    out.push(line(lib, BigInt(w[2])));
  } else {
    throw new Error(`unknown request ${req}`);
  }
}
process.stdout.write(out.join('\n') + '\n');
