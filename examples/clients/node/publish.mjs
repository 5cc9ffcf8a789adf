#!/usr/bin/env node
// Submit one task to an Assay campaign from Node.js, as an outside system would:
//   1. put each attachment into the campaign's upload bucket `<stream>_UP_<campaign>`
//      (a JetStream object store), named by its sha256;
//   2. publish TaskSubmitted on `<prefix>.ev.TaskSubmitted.<campaign>.-` with the
//      `Nats-Msg-Id` header set to the event id (a retried publish is stored once);
//   3. wait for the runner's answer, TaskAccepted or TaskRejected, on the campaign's subjects.
// The event is built from the fields of schemas/json/TaskSubmitted.json and checked against
// that schema before it is sent. Prints the answer as one JSON line; exits 0 when the task
// was accepted, 3 when it was rejected, 1 on any other failure.
//
// Connection settings come from the options or the environment (ASSAY_NATS_URL or NATS_URL,
// ..._USER, ..._PASSWORD, ..._TLS_CA, ASSAY_STREAM, ASSAY_SUBJECT_PREFIX).
//   node publish.mjs --campaign open --task-id rows --prompt "Count the rows" --attach data.csv
//   (--declare-only FILE declares an attachment without uploading it: the runner refuses it)
// With --signing-key DIR (ASSAY_SIGNING_KEY), the event is signed with the publisher key the
// operator enrolled (`assay keys enroll publisher-<campaign> --out DIR`), so the report counts
// it: an unsigned submission is still run, but the report lists it as refused.
import { createHash, randomUUID, webcrypto } from "node:crypto";
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { fromSeed } from "@nats-io/nkeys";
import { jetstream } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import Ajv2020 from "ajv/dist/2020.js";

const here = dirname(fileURLToPath(import.meta.url));

// Node 18 (Debian bookworm's) has Web Crypto only as a module; the object store client
// hashes with the global one.
globalThis.crypto ??= webcrypto;

function env(name) {
  return process.env[`ASSAY_${name}`] ?? process.env[name];
}

const { values: opt } = parseArgs({
  options: {
    // ASSAY_NATS_* are the names of `assay up --auth`'s <home>/nats/<user>.env files.
    server: { type: "string", default: env("NATS_URL") ?? "nats://127.0.0.1:4222" },
    user: { type: "string", default: env("NATS_USER") },
    password: { type: "string", default: env("NATS_PASSWORD") },
    "tls-ca": { type: "string", default: env("NATS_TLS_CA") },
    stream: { type: "string", default: process.env.ASSAY_STREAM ?? "ASSAY" },
    prefix: { type: "string", default: process.env.ASSAY_SUBJECT_PREFIX ?? "assay" },
    campaign: { type: "string" },
    "task-id": { type: "string" },
    prompt: { type: "string" },
    attach: { type: "string", multiple: true, default: [] },
    "declare-only": { type: "string", multiple: true, default: [] },
    schema: { type: "string", default: join(here, "../../../schemas/json/TaskSubmitted.json") },
    timeout: { type: "string", default: "30" },
    "signing-key": { type: "string", default: env("SIGNING_KEY") },
  },
});
for (const name of ["campaign", "task-id", "prompt"]) {
  if (!opt[name]) fail(`--${name} is required`);
}

function fail(message) {
  console.error(`publish.mjs: ${message}`);
  process.exit(1);
}

// A file as the task refers to it: its workspace path and the blob that holds its bytes.
function fileRef(path) {
  const data = readFileSync(path);
  const sha256 = createHash("sha256").update(data).digest("hex");
  return { data, ref: { path: basename(path), sha256, size: data.length } };
}

// Assay's least-privilege users get replies only on their own inbox prefix.
function inboxPrefix(user) {
  return user ? `_INBOX_${user}` : "_INBOX";
}

async function uploadBucket(js, bucket) {
  const objm = new Objm(js);
  try {
    return await objm.open(bucket);
  } catch (e) {
    if (!/not found/.test(String(e?.message))) throw e;
    // Without auth nobody made the bucket for us; a publisher user may not create it
    // (`assay up --auth --publisher CAMPAIGN` does), so this is for the open stack only.
    return await objm.create(bucket);
  }
}

// Objects are never replaced: an upload already there under its hash is the same bytes.
async function upload(objects, { data, ref }) {
  if ((await objects.info(ref.sha256)) !== null) return;
  await objects.putBlob({ name: ref.sha256 }, data);
}

function taskSubmitted(attachments) {
  const taskId = opt["task-id"];
  return {
    event_id: `node-${randomUUID()}`,
    event_type: "TaskSubmitted",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    campaign_id: opt.campaign,
    task_id: taskId,
    producer: { service: "node-publisher", version: "1.0.0" },
    task: { task_id: taskId, prompt: opt.prompt, attachments },
  };
}

function checkAgainstSchema(event) {
  // strict: false lets the schema's OpenAPI `discriminator` keyword through (oneOf decides).
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  const validate = ajv.compile(JSON.parse(readFileSync(opt.schema, "utf8")));
  if (!validate(event)) fail(`TaskSubmitted does not match ${opt.schema}: ${ajv.errorsText(validate.errors)}`);
}

// Resolves with the runner's answer to this submission (matched by its `submission` field).
function answerTo(nc, eventId, seconds) {
  const subjects = ["TaskAccepted", "TaskRejected"].map(
    (kind) => `${opt.prefix}.ev.${kind}.${opt.campaign}.-`,
  );
  const subs = subjects.map((subject) => nc.subscribe(subject));
  const heard = new Promise((resolve) => {
    for (const sub of subs) {
      (async () => {
        for await (const msg of sub) {
          const answer = msg.json();
          if (answer.submission === eventId) resolve(answer);
        }
      })();
    }
  });
  const timer = new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`no answer to ${eventId} within ${seconds}s`)), seconds * 1000),
  );
  return Promise.race([heard, timer]).finally(() => subs.forEach((s) => s.unsubscribe()));
}

async function main() {
  const uploaded = opt.attach.map(fileRef);
  const declared = opt["declare-only"].map(fileRef);
  const event = taskSubmitted([...uploaded, ...declared].map((f) => f.ref));
  checkAgainstSchema(event);

  const nc = await connect({
    servers: opt.server,
    user: opt.user,
    pass: opt.password,
    inboxPrefix: inboxPrefix(opt.user),
    maxReconnectAttempts: 0,
    ...(opt["tls-ca"] ? { tls: { caFile: opt["tls-ca"] } } : {}),
  });
  try {
    // checkAPI: false skips the client's probe of account info ($JS.API.INFO), which a
    // least-privilege publisher user may not read.
    const js = jetstream(nc, { checkAPI: false });
    if (uploaded.length) {
      const objects = await uploadBucket(js, `${opt.stream}_UP_${opt.campaign}`);
      for (const file of uploaded) await upload(objects, file);
    }
    // Subscribe before publishing, so the answer cannot come first.
    const answer = answerTo(nc, event.event_id, Number(opt.timeout));
    await nc.flush();
    const subject = `${opt.prefix}.ev.TaskSubmitted.${opt.campaign}.-`;
    const data = new TextEncoder().encode(JSON.stringify(event));
    await js.publish(subject, data, {
      msgID: event.event_id,
      expect: { streamName: opt.stream },
      headers: opt["signing-key"] ? signed(subject, data, opt["signing-key"]) : undefined,
    });
    const reply = await answer;
    console.log(JSON.stringify(reply));
    return reply.event_type === "TaskAccepted" ? 0 : 3;
  } finally {
    await nc.close();
  }
}

// Assay's signature: Ed25519 (nkeys) over `<subject>\n<bytes>`, with the enrolled public key
// and the operator's enrollment of it in headers (see assay/security/signing.py).
function signed(subject, data, dir) {
  const name = `publisher-${opt.campaign}`;
  const pair = fromSeed(new TextEncoder().encode(readFileSync(join(dir, `${name}.seed`), "utf8").trim()));
  const message = new Uint8Array([...new TextEncoder().encode(`${subject}\n`), ...data]);
  const h = natsHeaders();
  h.set("Assay-Signer", pair.getPublicKey());
  h.set("Assay-Signature", Buffer.from(pair.sign(message)).toString("base64url"));
  h.set("Assay-Enrollment", readFileSync(join(dir, `${name}.enrollment`), "utf8").trim());
  return h;
}

main().then(
  (code) => process.exit(code),
  (e) => fail(e?.stack ?? String(e)),
);
