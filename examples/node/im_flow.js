#!/usr/bin/env node
// The imid IM flow from Node.js with ioredis, against one server or a Redis Cluster: send a few
// messages (one retried: IDMP), sync them in pages, mark them read (one cursor map per
// conversation, clamped to its seq), pull a user's changed kinds of data (the incremental pull
// over one sequence map): sending through the native IM.SEND, then all of it through the
// imid_im Functions library (FCALL / FCALL_RO) and through the Lua scripts (EVALSHA, which
// ioredis reloads on NOSCRIPT): send.lua stores exactly what IM.SEND stores, and is the place to
// change that storage model; then the keyless commands (MSGID.DECODE, MSGID.HASH,
// UID.DECODE/ENCODE, OPENID.ENC/DEC).
//
//   node examples/node/im_flow.js [--host H] [--port P]        (or IMID_HOST / IMID_PORT)
//   node examples/node/im_flow.js --cluster H:P[,H:P...]       (or IMID_CLUSTER)
//
// Needs `npm ci` in examples/node (scripts/deps.sh runs it) and a server with imid loaded.
// Exits 1, saying why, when a reply is not what the flow expects.
"use strict";

const fs = require("fs");
const path = require("path");
const Redis = require("ioredis");

const EXAMPLES = path.join(__dirname, "..");

// Every key of a conversation carries the hash tag {conv:<id>} (see examples/README.md), so
// each call below touches one slot and a cluster client sends it to the primary owning it.
class Conv {
  constructor(id, channelType = 1) {
    this.tag = `{conv:${id}}`;
    this.channelType = channelType;
    this.seq = `${this.tag}:seq`;
  }
  inbox(user) { return `${this.tag}:inbox:${user}`; }
  trimmed(user) { return `${this.tag}:trimmed:${user}`; }
  // every member's read cursor: one sequence map, field = user
  readKey() { return `${this.tag}:read`; }
}

// One user's sync sequences (a sequence map, field = kind of data), the per-kind change logs
// and what their cap dropped; every key carries the hash tag {<user>}.
class User {
  constructor(id) {
    this.seqs = `app:seq:{${id}}`;
    this.trimmed = `app:trimmed:{${id}}`;
    this.id = id;
  }
  log(kind) { return `app:log:{${this.id}}:${kind}`; }
}

// Ways to run the same operations. Each takes (numkeys, ...keys, ...args).
const viaFunctions = {
  name: "FCALL",
  send: (r, n, ...a) => r.fcall("imid_send", n, ...a),
  // imid_sync is flagged no-writes: FCALL_RO, which replicas serve too.
  sync: (r, n, ...a) => r.fcall_ro("imid_sync", n, ...a),
  read: (r, n, ...a) => r.fcall("imid_read", n, ...a),
  change: (r, n, ...a) => r.fcall("imid_change", n, ...a),
  pull: (r, n, ...a) => r.fcall_ro("imid_pull", n, ...a),
};
// The native commands take their script's keys and arguments without numkeys.
const viaNative = {
  name: "IM.SEND",
  send: (r, n, ...a) => r.call("IM.SEND", ...a),
  // IM.SYNC and IM.PULL are read-only: replicas serve them too.
  sync: (r, n, ...a) => r.call("IM.SYNC", ...a),
  read: (r, n, ...a) => r.call("IM.READ", ...a),
  change: (r, n, ...a) => r.call("IM.CHANGE", ...a),
  pull: (r, n, ...a) => r.call("IM.PULL", ...a),
};
const viaScripts = {
  name: "EVALSHA",
  // defineCommand'ed below: EVALSHA, and on NOSCRIPT (after a restart, a failover or SCRIPT
  // FLUSH) EVAL, which caches the script again.
  send: (r, n, ...a) => r.imidSend(n, ...a),
  sync: (r, n, ...a) => r.imidSync(n, ...a),
  read: (r, n, ...a) => r.imidRead(n, ...a),
  change: (r, n, ...a) => r.imidChange(n, ...a),
  pull: (r, n, ...a) => r.imidPull(n, ...a),
};

async function send(via, r, conv, sender, recipients, clientMsgId, body, cap = 100) {
  const keys = [conv.tag, conv.seq];
  for (const u of recipients) keys.push(conv.inbox(u), conv.trimmed(u));
  // uid: the message's 64-bit UID as decimal text (exact through Lua, whose numbers are
  // doubles); a BigInt here, for the same reason. A retry (duplicate) replies the original
  // seq and the IDs read back from an inbox (null when no inbox named holds it any more).
  const [seq, msgid, dup, uid] = await via.send(r, keys.length, ...keys,
    conv.channelType, sender, clientMsgId, body, cap);
  return { seq: Number(seq), msgid, duplicate: Number(dup) === 1,
    uid: uid === null ? null : BigInt(uid) };
}

async function sync(via, r, conv, user, lastSeq, limit) {
  const keys = [conv.seq, conv.inbox(user), conv.trimmed(user)];
  const [maxSeq, cursor, complete, trimmed, flat] = await via.sync(r, keys.length, ...keys,
    lastSeq, limit);
  const messages = [];
  for (let i = 0; i < flat.length; i += 2) {
    // member = msgid|uid|sender|body; the body may hold '|' itself
    const [msgid, uid, sender, ...body] = flat[i + 1].split("|");
    messages.push({ seq: Number(flat[i]), msgid, uid: BigInt(uid), sender, body: body.join("|") });
  }
  return { maxSeq: Number(maxSeq), cursor: Number(cursor), complete: Number(complete) === 1,
    trimmed: Number(trimmed), messages };
}

async function read(via, r, conv, user, seq) {
  const keys = [conv.readKey(), conv.inbox(user), conv.seq];
  const [cursor, unread] = await via.read(r, keys.length, ...keys, user, seq);
  return { cursor: Number(cursor), unread: Number(unread) };
}

// Records a change of one kind of the user's data; its seq (SEQ.HNEXT).
async function change(via, r, user, kind, text, cap = 100) {
  const keys = [user.seqs, user.trimmed, user.log(kind)];
  return Number(await via.change(r, keys.length, ...keys, kind, text, cap));
}

// The kinds whose seq is above the one held ({kind: seq}): {kind: {seq, reset, changes}};
// the other kinds are not in the reply.
async function pull(via, r, user, held) {
  const kinds = Object.keys(held).sort();
  const keys = [user.seqs, user.trimmed, ...kinds.map((k) => user.log(k))];
  const flat = await via.pull(r, keys.length, ...keys, ...kinds.flatMap((k) => [k, held[k]]));
  const out = {};
  for (let i = 0; i < flat.length; i += 4) {
    const changes = [];
    for (let j = 0; j < flat[i + 3].length; j += 2) {
      changes.push([Number(flat[i + 3][j]), flat[i + 3][j + 1]]);
    }
    out[flat[i]] = { seq: Number(flat[i + 1]), reset: Number(flat[i + 2]) === 1, changes };
  }
  return out;
}

function check(ok, what) {
  if (!ok) throw new Error(what);
}

// A reply with named fields (MSGID.DECODE, UID.DECODE, OPENID.DEC) as an object: ioredis
// speaks RESP2, where it is a flat name/value array. Values stay text (see stringNumbers).
function fields(flat) {
  const o = {};
  for (let i = 0; i < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
}

async function flow(via, r, clusterMode) {
  console.log(`== via ${via.name}`);
  const conv = new Conv(`node-${process.pid}-${via.name}`);
  const sent = [];
  for (let i = 1; i <= 5; i++) {
    const s = await send(via, r, conv, "alice", ["bob"], `c${i}`, `hello ${i}`);
    console.log(`send c${i}: seq ${s.seq} msgid ${s.msgid} uid ${s.uid}`);
    check(!s.duplicate, `c${i} was taken for a retry`);
    sent.push(s);
  }
  const again = await send(via, r, conv, "alice", ["bob"], "c1", "hello 1");
  console.log(`retry c1: seq ${again.seq} msgid ${again.msgid} uid ${again.uid} duplicate ${again.duplicate}`);
  check(again.duplicate && again.seq === sent[0].seq && again.msgid === sent[0].msgid &&
    again.uid === sent[0].uid, "the retried send was not deduplicated");
  check(Number(await r.zcard(conv.inbox("bob"))) === 5, "the retry stored the message again");

  let last = 0;
  const got = [];
  for (let page = 0; ; page++) {
    check(page < 10, "sync never completed");
    const p = await sync(via, r, conv, "bob", last, 2);
    for (const m of p.messages) {
      console.log(`  bob got seq ${m.seq} ${m.msgid} (uid ${m.uid}) from ${m.sender}: ${m.body}`);
      got.push(m.seq);
      check(m.uid === sent[got.length - 1].uid, `seq ${m.seq}: uid ${m.uid} is not the one sent`);
    }
    last = p.cursor;
    console.log(`sync: cursor ${p.cursor} max_seq ${p.maxSeq} complete ${p.complete}`);
    if (p.complete) break;
  }
  check(JSON.stringify(got) === JSON.stringify(sent.map((s) => s.seq)),
    `sync returned seqs ${got}, sent ${sent.map((s) => s.seq)}`);

  let rd = await read(via, r, conv, "bob", sent[2].seq);
  console.log(`read ${sent[2].seq}: cursor ${rd.cursor} unread ${rd.unread}`);
  check(rd.unread === 2, `${rd.unread} unread after reading 3 of 5`);
  rd = await read(via, r, conv, "bob", sent[0].seq);
  console.log(`late read ${sent[0].seq}: cursor ${rd.cursor} unread ${rd.unread}`);
  check(rd.cursor === sent[2].seq, "a late read moved the cursor back");
  rd = await read(via, r, conv, "bob", last + 100);
  console.log(`read ${last + 100}: cursor ${rd.cursor} unread ${rd.unread}`);
  check(rd.cursor === last && rd.unread === 0,
    `an ack past the max seq ${last} gave cursor ${rd.cursor}, ${rd.unread} unread`);

  // The incremental pull: the phone holds a seq per kind and pulls only what moved.
  const user = new User(`node-${process.pid}-${via.name}`);
  const phone = { friendship: 0, group: 0, conversation: 0, profile: 0 };
  for (const [kind, text] of [["friendship", "+bob"], ["friendship", "+carol"], ["group", "join g1"]]) {
    console.log(`change ${kind} ${JSON.stringify(text)}: seq ${await change(via, r, user, kind, text)}`);
  }
  for (const want of [["friendship", "group"], []]) {
    const got = await pull(via, r, user, phone);
    const kinds = Object.keys(got).sort();
    console.log(`pull: ${kinds.length} kind(s) changed [${kinds}]`);
    for (const k of kinds) {
      console.log(`  ${k} -> seq ${got[k].seq}: ${JSON.stringify(got[k].changes)}`);
      phone[k] = got[k].seq;
    }
    check(JSON.stringify(kinds) === JSON.stringify(want), `pulled [${kinds}], expected [${want}]`);
  }
  const server = fields(await r.call("SEQ.HGETALL", user.seqs));
  console.log(`SEQ.HGETALL ${user.seqs}: ${JSON.stringify(server)}`);
  for (const k of Object.keys(phone)) {
    check(Number(server[k] || 0) === phone[k], `${k}: the phone holds ${phone[k]}, the server ${server[k]}`);
  }

  // Keyless commands: `call` sends a command ioredis does not know by name. A command it
  // finds no key in goes to a random primary of the cluster: right for these pure commands,
  // which every node answers alike.
  const msgid = sent[0].msgid;
  const d = fields(await r.call("MSGID.DECODE", msgid));
  console.log(`MSGID.DECODE ${msgid}: time ${d.time} seq ${d.seq} channel_type ${d.channel_type} hash ${d.hash}`);
  check(Number(d.channel_type) === conv.channelType, "MSGID.DECODE: wrong channel_type");
  const hash = await r.call("MSGID.HASH", conv.tag);
  check(hash === d.hash, `MSGID.HASH ${conv.tag} = ${hash}, the ID carries ${d.hash}`);
  if (clusterMode) {
    // In cluster mode the hash is the target's slot above 8 bits: the ID names its shard.
    const slot = Number(await r.call("CLUSTER", "KEYSLOT", conv.tag));
    console.log(`hash >> 8 = ${Number(d.hash) >> 8}, CLUSTER KEYSLOT ${conv.tag} = ${slot}`);
    check(Number(d.hash) >> 8 === slot, "the ID does not carry its conversation's slot");
  }
  // UID.DECODE takes the UID as decimal text: from a BigInt, String(uid) keeps every digit.
  const uid = sent[0].uid;
  const u = fields(await r.call("UID.DECODE", String(uid)));
  console.log(`UID.DECODE ${uid}: time ${u.time} node ${u.node} seq ${u.seq}`);
  const again2 = await r.call("UID.ENCODE", u.time, u.node, u.seq);
  check(BigInt(again2) === uid, `UID.ENCODE of UID.DECODE's fields gave ${again2}, not ${uid}`);
  const openid = await r.call("OPENID.ENC", msgid, 1, 2);
  const o = fields(await r.call("OPENID.DEC", openid));
  console.log(`OPENID.ENC: ${openid} -> OPENID.DEC msgid ${o.msgid} msg_type ${o.msg_type} direction ${o.direction}`);
  check(o.msgid === msgid && o.msg_type === "1" && o.direction === "2", "OPENID round trip");
}

function parseArgs() {
  const a = process.argv.slice(2);
  const opt = {
    host: process.env.IMID_HOST || "127.0.0.1",
    port: Number(process.env.IMID_PORT || 6379),
    cluster: process.env.IMID_CLUSTER || "",
  };
  for (let i = 0; i < a.length; i += 2) {
    const [k, v] = [a[i], a[i + 1]];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === "--host") opt.host = v;
    else if (k === "--port") opt.port = Number(v);
    else if (k === "--cluster") opt.cluster = v;
    else throw new Error(`unknown option ${k}`);
  }
  return opt;
}

// Integer replies come as text (stringNumbers: true): UID.GEN and UID.ENCODE reply 63-bit
// integers, which a JavaScript number holds exactly only up to 2^53. The helpers above turn
// seqs and counts into numbers and UIDs into BigInts.
// Give up instead of retrying for ever: an example that cannot reach its server should say so.
const retry = (times) => (times > 10 ? null : 200);

async function main() {
  const opt = parseArgs();
  let r;
  let primaries;
  if (opt.cluster) {
    const nodes = opt.cluster.split(",").map((hp) => {
      const at = hp.lastIndexOf(":");
      return { host: hp.slice(0, at), port: Number(hp.slice(at + 1)) };
    });
    r = new Redis.Cluster(nodes, {
      clusterRetryStrategy: retry,
      redisOptions: { maxRetriesPerRequest: 3, connectTimeout: 5000, stringNumbers: true },
    });
    await new Promise((ok, fail) => { r.once("ready", ok); r.once("error", fail); });
    primaries = r.nodes("master");
    console.log(`cluster: ${primaries.length} primaries`);
  } else {
    r = new Redis({ host: opt.host, port: opt.port, maxRetriesPerRequest: 3,
      connectTimeout: 5000, retryStrategy: retry, stringNumbers: true });
    primaries = [r];
  }
  try {
    // Functions live on each node: load the library on every primary (replicas get it by
    // replication). FCALL then routes by its keys like any keyed command.
    const lib = fs.readFileSync(path.join(EXAMPLES, "functions", "imid_im.lua"), "utf8");
    for (const p of primaries) console.log("FUNCTION LOAD:", await p.function("LOAD", "REPLACE", lib));
    for (const [name, file] of [["imidSend", "send"], ["imidSync", "sync"], ["imidRead", "read"],
      ["imidChange", "change"], ["imidPull", "pull"]]) {
      r.defineCommand(name, { lua: fs.readFileSync(path.join(EXAMPLES, "lua", `${file}.lua`), "utf8") });
    }
    for (const via of [viaNative, viaFunctions, viaScripts]) await flow(via, r, Boolean(opt.cluster));
  } finally {
    r.disconnect();
  }
}

// Every step is bounded: the whole run too.
setTimeout(() => { console.error("timed out after 60 s"); process.exit(1); }, 60000).unref();
main().then(
  () => console.log("ok"),
  (e) => { console.error(`im_flow.js: ${e.message}`); process.exit(1); },
);
