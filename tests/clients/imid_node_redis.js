// imid through node-redis (the `redis` package), against one server or a Redis Cluster: the
// calls docs/clients.md shows. tests/it/clients.rs runs it and checks every line it prints
// against the servers (which node served each call, what the keys hold).
//
//   node imid_node_redis.js --host H --port P --replica-port R --tags a,b   one primary (fence on), its replica
//   node imid_node_redis.js --cluster H:P[,H:P...] --tags a,b,c [--routes first-arg]
//
// The same steps as imid_glide.js: per tag, SEQ.NEXT with an IDMP token and its retry, MSGID.GEN,
// UID.GEN, IM.SEND and its retry, MSGID.DECODE, SEQ.GET (in a Cluster from the key's shard,
// replicas included), WRONGTYPE and an IDMP error; standalone, then the fence.
// `--routes first-arg` passes the command's first argument as the first key instead of its key
// (what the test does to see its checks fail).
"use strict";
const net = require("net");
const { createClient, createCluster, RESP_TYPES } = require("redis");

// node-redis gives integer replies as JavaScript numbers, exact only up to 2^53; this mapping
// gives their decimal text instead (or ask for UID.GEN ... STRING).
const EXACT = { typeMapping: { [RESP_TYPES.NUMBER]: String } };

function args() {
  const a = { host: "127.0.0.1", routes: "key" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    a[argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase())] = argv[i + 1];
  }
  return a;
}

// A node-redis client, standalone or Cluster. The Cluster client routes a raw command by the
// first key given beside it (`sendCommand(firstKey, isReadonly, args)`): it knows no keys of
// module commands, and on MOVED it asks for the slot map again and routes by that same key, so
// a wrong one fails (MaxCommandRedirectionsError), where no key at all lands on random nodes.
class Imid {
  constructor(client, cluster, routes) {
    Object.assign(this, { client, cluster, routes });
  }
  call(key, args, options) {
    return this.send(key, false, args, options);
  }
  read(key, args, options) {
    return this.send(key, true, args, options);
  }
  send(key, readonly, args, options) {
    if (!this.cluster) return this.client.sendCommand(args, options);
    const first = this.routes === "key" ? key : args[1];
    return this.client.sendCommand(first, readonly, args, options);
  }
}

async function conversation(db, tag) {
  const t = `{${tag}}`;
  const seq = `${t}:seq`;

  // A send's sequence value, once per token: the retry gets the first call's value, marked.
  console.log("seq.next", tag, ...(await db.call(seq, ["SEQ.NEXT", seq, "IDMP", "client-msg-1"])));
  console.log("seq.retry", tag, ...(await db.call(seq, ["SEQ.NEXT", seq, "IDMP", "client-msg-1"])));

  // MSGID.GEN's key is its second argument: the first key is the target.
  const msgid = await db.call(t, ["MSGID.GEN", "1", t]);
  console.log("msgid.gen", tag, msgid);
  console.log("uid.gen", tag, await db.call(t, ["UID.GEN", t, "STRING"]));
  console.log("uid.count", tag, ...(await db.call(t, ["UID.GEN", t, "COUNT", "3"], EXACT)));
  const lossy = await db.call(t, ["UID.GEN", t, "COUNT", "3"]);
  console.log("uid.number", tag, ...lossy.map((u) => `${typeof u}:${Number.isSafeInteger(u)}`));

  // IM.SEND: [seq, msgid, duplicate, uid]; the UID comes as decimal text and stays text.
  const send = ["IM.SEND", t, seq, `${t}:inbox:bob`, `${t}:trimmed:bob`, "1", "alice", "c1", "hi", "100"];
  for (const name of ["im.send", "im.retry"]) {
    const [s, m, d, u] = await db.call(t, send);
    console.log(name, tag, s, m, d, u);
  }

  // A map under RESP3, node-redis's default protocol: a plain object. Keyless: any node answers
  // (no first key: a random one, replicas included).
  const f = await db.read(undefined, ["MSGID.DECODE", msgid]);
  console.log("msgid.decode", tag, f.time, f.seq, f.channel_type, f.hash);

  // A replica may answer a read once it has the writes: WAIT for one, then read. With
  // useReplicas a read-only call goes to the shard's nodes in turn, primary and replicas.
  await db.call(seq, ["WAIT", "1", "2000"]);
  for (let i = 0; i < 2; i++) {
    console.log("seq.get", tag, await db.read(seq, ["SEQ.GET", seq]));
  }

  await db.call(`${t}:str`, ["SET", `${t}:str`, "x"]);
  for (const [what, key, a] of [
    ["wrongtype", `${t}:str`, ["SEQ.NEXT", `${t}:str`]],
    ["idmp", seq, ["SEQ.NEXT", seq, "COUNT", "2", "IDMP", "client-msg-1"]],
  ]) {
    try {
      await db.call(key, a);
      console.log(`error.${what}`, tag, "none");
    } catch (e) {
      console.log(`error.${what}`, tag, e.constructor.name, e.message);
    }
  }
}

// DEBUG SLEEP on the replica over a plain socket; resolves with its answer when it is back.
function sleepReplica(port, secs) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(`DEBUG SLEEP ${secs}\r\n`));
    s.once("data", (d) => {
      s.destroy();
      resolve(d.toString().trim());
    });
    s.once("error", reject);
  });
}

// A call the fence makes wait: the replica sleeps `secs`, so nothing acknowledges. `options`:
// node-redis's per-command options ({ timeout } in ms; none by default). The retry goes
// through `retry`.
async function fenced(db, key, name, secs, replicaPort, options, retry = db) {
  const sleeper = sleepReplica(replicaPort, secs);
  await new Promise((r) => setTimeout(r, 200));
  const t0 = Date.now();
  try {
    const v = await db.call(key, ["SEQ.NEXT", key, "IDMP", name], options);
    console.log("fence", name, "ok", Date.now() - t0, ...v);
  } catch (e) {
    console.log("fence", name, e.constructor.name, Date.now() - t0, e.message);
  }
  if ((await sleeper) !== "+OK") throw new Error("DEBUG SLEEP failed");
  // The same token once the replica is back: the value recorded for it, marked a duplicate.
  // Until the primary has its next acknowledgement (within about a second), a replica silent
  // for 2 s still counts as gone and the call is refused at once: retried as a user would.
  for (let refused = 0; ; refused++) {
    try {
      const v = await retry.call(key, ["SEQ.NEXT", key, "IDMP", name]);
      console.log("fence.retry", name, ...v, refused);
      return;
    } catch (e) {
      if (!String(e.message).includes("NOREPLICAS") || refused >= 30) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function main() {
  const a = args();
  const tags = a.tags.split(",");
  let db;
  if (a.cluster) {
    const rootNodes = a.cluster.split(",").map((n) => ({ url: `redis://${n}` }));
    // useReplicas: read-only calls (isReadonly true) may go to replicas.
    const client = createCluster({ rootNodes, useReplicas: true });
    client.on("error", (e) => console.error("cluster error:", e.message));
    await client.connect();
    db = new Imid(client, true, a.routes);
  } else {
    const client = createClient({ url: `redis://${a.host}:${a.port}` });
    client.on("error", (e) => console.error("client error:", e.message));
    await client.connect();
    db = new Imid(client, false, a.routes);
  }
  for (const tag of tags) await conversation(db, tag);

  if (a.replicaPort) {
    const key = `{${tags[0]}}:fence`;
    const port = Number(a.replicaPort);
    // A command's `timeout` bounds only its wait to be written: once sent, the call waits for
    // the fence whatever it says.
    await fenced(db, key, "command-timeout", "0.8", port, { timeout: 250 });
    // `socket.socketTimeout` below imid.fence-timeout: the socket is closed while the fence
    // still waits, failing the call, and by default the client does not reconnect after a
    // socket timeout: it stays closed.
    const short = createClient({ url: `redis://${a.host}:${a.port}`, socket: { socketTimeout: 250 } });
    short.on("error", (e) => console.error("short client error:", e.message));
    await short.connect();
    await fenced(new Imid(short, false, "key"), key, "socket-timeout", "0.8", port, undefined, db);
    console.log("fence.client socket-timeout open", short.isOpen);
    if (short.isOpen) await short.close();
    // node-redis's default, no timeout: the call gets imid's NOREPLICAS answer.
    await fenced(db, key, "no-timeout", "1.6", port, undefined);
  }
  await db.client.close();
  console.log("ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
