// imid through Valkey GLIDE for Node.js (`@valkey/valkey-glide`), against one server or a Redis
// Cluster: the calls docs/clients.md shows. tests/it/clients.rs runs it and checks every line
// it prints against the servers (which node served each call, what the keys hold).
//
//   node imid_glide.js --host H --port P --replica-port R --tags a,b   one primary (fence on), its replica
//   node imid_glide.js --cluster H:P[,H:P...] --tags a,b,c [--routes none]
//
// The same steps as imid_glide.py (GLIDE's Python binding; one Rust core): per tag, SEQ.NEXT with
// an IDMP token and its retry, MSGID.GEN, UID.GEN, IM.SEND and its retry, MSGID.DECODE, SEQ.GET
// (in a Cluster from a replica), WRONGTYPE and an IDMP error; standalone, then the fence.
// `--routes none` leaves out every route argument (what the test does to see its checks fail).
"use strict";
const net = require("net");
const { GlideClient, GlideClusterClient, RequestError } = require("@valkey/valkey-glide");

// Above imid.fence-timeout (1000 ms by default): a fenced call that waits gets imid's NOREPLICAS
// answer instead of GLIDE's TimeoutError (GLIDE's default request timeout is 250 ms).
const REQUEST_TIMEOUT_MS = 3000;

function args() {
  const a = { host: "127.0.0.1", routes: "key" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    a[argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase())] = argv[i + 1];
  }
  return a;
}

// A GLIDE client and the route of each call: in a Cluster a keyed imid command goes to the
// primary of its key's slot (GLIDE routes a command it does not know by its first argument,
// which is MSGID.GEN's channel type, not its key), a read-only one (SEQ.GET) to a replica.
class Imid {
  constructor(client, cluster, routes) {
    Object.assign(this, { client, cluster, routes });
  }
  call(args, route) {
    if (!this.cluster || this.routes !== "key" || !route) return this.client.customCommand(args);
    return this.client.customCommand(args, { route });
  }
  primary(key) {
    return { type: "primarySlotKey", key };
  }
  replica(key) {
    return { type: "replicaSlotKey", key };
  }
}

async function conversation(db, tag) {
  const t = `{${tag}}`;
  const seq = `${t}:seq`;
  const p = db.primary(t);

  // A send's sequence value, once per token: the retry gets the first call's value, marked.
  console.log("seq.next", tag, ...(await db.call(["SEQ.NEXT", seq, "IDMP", "client-msg-1"], p)));
  console.log("seq.retry", tag, ...(await db.call(["SEQ.NEXT", seq, "IDMP", "client-msg-1"], p)));

  const msgid = await db.call(["MSGID.GEN", "1", t], p);
  console.log("msgid.gen", tag, msgid);
  // GLIDE gives integer replies as JavaScript numbers, exact only up to 2^53: a UID needs STRING.
  console.log("uid.gen", tag, await db.call(["UID.GEN", t, "STRING"], p));
  console.log("uid.count", tag, ...(await db.call(["UID.GEN", t, "COUNT", "3", "STRING"], p)));
  const lossy = await db.call(["UID.GEN", t, "COUNT", "3"], p);
  console.log("uid.number", tag, ...lossy.map((u) => `${typeof u}:${Number.isSafeInteger(u)}`));

  // IM.SEND: [seq, msgid, duplicate, uid]; the UID comes as decimal text and stays text.
  const send = ["IM.SEND", t, seq, `${t}:inbox:bob`, `${t}:trimmed:bob`, "1", "alice", "c1", "hi", "100"];
  for (const name of ["im.send", "im.retry"]) {
    const [s, m, d, u] = await db.call(send, p);
    console.log(name, tag, s, m, d, u);
  }

  // A map under RESP3, GLIDE's default protocol: an array of {key, value}.
  const fields = new Map((await db.call(["MSGID.DECODE", msgid], p)).map((f) => [f.key, f.value]));
  console.log("msgid.decode", tag, ...["time", "seq", "channel_type", "hash"].map((k) => fields.get(k)));

  // A replica may answer a read once it has the writes: WAIT for one, then read from it.
  await db.call(["WAIT", "1", "2000"], p);
  for (let i = 0; i < 2; i++) {
    console.log("seq.get", tag, await db.call(["SEQ.GET", seq], db.replica(seq)));
  }

  await db.call(["SET", `${t}:str`, "x"], p);
  for (const [what, a] of [
    ["wrongtype", ["SEQ.NEXT", `${t}:str`]],
    ["idmp", ["SEQ.NEXT", seq, "COUNT", "2", "IDMP", "client-msg-1"]],
  ]) {
    try {
      await db.call(a, p);
      console.log(`error.${what}`, tag, "none");
    } catch (e) {
      if (!(e instanceof RequestError)) throw e;
      console.log(`error.${what}`, tag, e.constructor.name, e.message);
    }
  }
}

// DEBUG SLEEP on the replica over a plain socket (a GLIDE standalone client refuses a replica
// alone: "No primary node found"); resolves with its answer when the replica is back.
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

// A call the fence makes wait: the replica sleeps `secs`, so nothing acknowledges.
async function fenced(db, key, name, secs, replicaPort) {
  const sleeper = sleepReplica(replicaPort, secs);
  await new Promise((r) => setTimeout(r, 200));
  const t0 = Date.now();
  try {
    const v = await db.call(["SEQ.NEXT", key, "IDMP", name]);
    console.log("fence", name, "ok", Date.now() - t0, ...v);
  } catch (e) {
    if (!(e instanceof RequestError)) throw e;
    console.log("fence", name, e.constructor.name, Date.now() - t0, e.message);
  }
  if ((await sleeper) !== "+OK") throw new Error("DEBUG SLEEP failed");
  // The same token once the replica is back: the value recorded for it, marked a duplicate.
  // Until the primary has its next acknowledgement (within about a second), a replica silent
  // for 2 s still counts as gone and the call is refused at once: retried as a user would.
  for (let refused = 0; ; refused++) {
    try {
      const v = await db.call(["SEQ.NEXT", key, "IDMP", name]);
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
    const addresses = a.cluster.split(",").map((n) => {
      const [host, port] = n.split(":");
      return { host, port: Number(port) };
    });
    // preferReplica: without it GLIDE opens its replica connections without READONLY, and a
    // replica route gets MOVED to the primary.
    const client = await GlideClusterClient.createClient({
      addresses,
      readFrom: "preferReplica",
      requestTimeout: REQUEST_TIMEOUT_MS,
    });
    db = new Imid(client, true, a.routes);
  } else {
    const addresses = [{ host: a.host, port: Number(a.port) }];
    db = new Imid(await GlideClient.createClient({ addresses, requestTimeout: REQUEST_TIMEOUT_MS }), false, a.routes);
  }
  for (const tag of tags) await conversation(db, tag);

  if (a.replicaPort) {
    const key = `{${tags[0]}}:fence`;
    const addresses = [{ host: a.host, port: Number(a.port) }];
    const short = new Imid(await GlideClient.createClient({ addresses }), false, "key");
    // GLIDE's default request timeout (250 ms) ends the call while the fence still waits.
    await fenced(short, key, "default-timeout", "0.8", Number(a.replicaPort));
    // One above imid.fence-timeout: the call gets imid's NOREPLICAS answer.
    await fenced(db, key, "long-timeout", "1.6", Number(a.replicaPort));
    short.client.close();
  }
  db.client.close();
  console.log("ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
