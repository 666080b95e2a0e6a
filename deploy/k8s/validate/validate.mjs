// Offline check of rendered deploy/k8s manifests (`kubectl kustomize` output,
// or the base's files as they are):
//   node validate.mjs --microddp BIN FILE.yaml...
// 1. every object against the Kubernetes JSON schemas (kubernetes-models'
//    validate(): types, required fields, enums; unknown fields are not
//    flagged, as kubectl's default validation does not);
// 2. the job's own invariants: an Indexed Job whose completions and
//    parallelism equal the coordinator's --world-size, RANK from the
//    completion index, the workers' --coordinator naming the Service and its
//    gRPC port, the Service reaching the coordinator's pod and ports, every
//    file the flags name mounted, every Secret a volume names present (with
//    the keys the flags read), --device=cuda wherever a GPU is requested;
// 3. every flag a container passes is a flag of that microddp command
//    (`microddp COMMAND --help`).
// Prints one line per problem and exits 1, or "ok: ..." and exits 0.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const args = process.argv.slice(2);
const binAt = args.indexOf("--microddp");
if (binAt < 0 || args.length < binAt + 3) {
  console.error("usage: node validate.mjs --microddp BIN FILE.yaml...");
  process.exit(2);
}
const microddp = args[binAt + 1];
const files = args.filter((_, i) => i !== binAt && i !== binAt + 1);
const problems = [];
const problem = (where, what) => problems.push(`${where}: ${what}`);

// 1. Parse and schema-check.
const objects = [];
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) { problem(file, doc.errors[0].message); continue; }
    const o = doc.toJSON();
    if (!o) continue;
    // kustomize wraps a Secret's base64 over lines; the API server's decoder
    // skips the line breaks, the schema's "byte" format does not.
    if (o.kind === "Secret")
      for (const k of Object.keys(o.data ?? {})) o.data[k] = String(o.data[k]).replace(/\s+/g, "");
    const where = `${file}: ${o.kind}/${o.metadata?.name}`;
    let Model;
    try {
      Model = (await import(`kubernetes-models/${o.apiVersion}/${o.kind}`))[o.kind];
    } catch {
      problem(where, `no schema for apiVersion ${o.apiVersion} kind ${o.kind}`);
      continue;
    }
    try {
      new Model(o).validate();
    } catch (e) {
      problem(where, `schema: ${e.message}`);
    }
    objects.push({ o, where });
  }
}
const ofKind = (kind) => objects.filter((x) => x.o.kind === kind);
const one = (kind) => {
  const xs = ofKind(kind);
  if (xs.length !== 1) problem(files.join(" "), `expected one ${kind}, found ${xs.length}`);
  return xs[0];
};

// --flag=value args as a map (flags without a value map to true).
const flagsOf = (c) => new Map((c.args ?? []).slice(1).filter((a) => a.startsWith("--"))
  .map((a) => { const i = a.indexOf("="); return i < 0 ? [a, true] : [a.slice(0, i), a.slice(i + 1)]; }));

const service = one("Service");
const deployment = one("Deployment");
const job = one("Job");
const secrets = new Map(ofKind("Secret").map(({ o }) => [o.metadata.name, o]));

const containersOf = (x) => x ? x.o.spec.template.spec.containers.map((c) => ({ c, x })) : [];
const coord = deployment && containersOf(deployment)[0]?.c;
const worker = job && containersOf(job)[0]?.c;
if (coord && worker) {
  const cf = flagsOf(coord), wf = flagsOf(worker);
  // 2. Invariants.
  if (coord.args?.[0] !== "coordinator") problem(deployment.where, "the container's first argument must be `coordinator`");
  if (worker.args?.[0] !== "worker") problem(job.where, "the container's first argument must be `worker`");
  const world = Number(cf.get("--world-size"));
  const js = job.o.spec;
  if (js.completionMode !== "Indexed") problem(job.where, "completionMode must be Indexed (the index is the rank)");
  if (js.completions !== world || js.parallelism !== world)
    problem(job.where, `completions ${js.completions} and parallelism ${js.parallelism} must both equal the coordinator's --world-size ${world}`);
  if (js.backoffLimit !== 0) problem(job.where, "backoffLimit must be 0 (a lone pod cannot re-join a formed job)");
  const rank = (worker.env ?? []).find((e) => e.name === "RANK");
  if (rank?.valueFrom?.fieldRef?.fieldPath !== "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    problem(job.where, "RANK must come from the pod's batch.kubernetes.io/job-completion-index annotation");
  const podLabels = deployment.o.spec.template.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(service.o.spec.selector ?? {}))
    if (podLabels[k] !== v) problem(service.where, `selector ${k}=${v} does not match the coordinator's pod`);
  const ports = new Map((coord.ports ?? []).map((p) => [p.name, p.containerPort]));
  for (const p of service.o.spec.ports)
    if (!ports.has(p.targetPort)) problem(service.where, `targetPort ${p.targetPort} is not a port of the coordinator's container`);
  if (Number(cf.get("--port")) !== ports.get("grpc")) problem(deployment.where, `--port ${cf.get("--port")} is not the grpc containerPort ${ports.get("grpc")}`);
  const grpc = service.o.spec.ports.find((p) => p.targetPort === "grpc");
  const want = `${service.o.metadata.name}:${grpc?.port}`;
  if (wf.get("--coordinator") !== want) problem(job.where, `--coordinator ${wf.get("--coordinator")} must be the Service's ${want}`);
  const gpus = (x) => containersOf(x).some(({ c }) => c.resources?.limits?.["nvidia.com/gpu"]);
  if ((gpus(job) || gpus(deployment)) && cf.get("--device") !== "cuda")
    problem(deployment.where, "GPUs are requested but the job's --device is not cuda");
  if (!gpus(job) && cf.get("--device") === "cuda") problem(job.where, "--device cuda without a GPU per worker");

  for (const { c, x } of [...containersOf(deployment), ...containersOf(job)]) {
    const vols = new Map((x.o.spec.template.spec.volumes ?? []).map((v) => [v.name, v]));
    for (const [flag, value] of flagsOf(c)) {
      if (typeof value !== "string" || !value.startsWith("/") || flag === "--run-dir") continue;
      const mount = (c.volumeMounts ?? []).find((m) => value.startsWith(m.mountPath + "/"));
      if (!mount) { problem(x.where, `${flag} ${value} lies under no volumeMount`); continue; }
      const secretName = vols.get(mount.name)?.secret?.secretName;
      if (!secretName || !secrets.size) continue;  // unrendered base: no Secrets to check against
      const key = value.slice(mount.mountPath.length + 1);
      if (!secrets.has(secretName)) problem(x.where, `volume ${mount.name} names Secret ${secretName}, which is not in the output`);
      else if (!(key in (secrets.get(secretName).data ?? {}))) problem(x.where, `${flag} reads ${key}, which Secret ${secretName} does not hold`);
    }
    // 3. Flags microddp accepts.
    const cmd = c.args?.[0];
    let help = "";
    try {
      help = execFileSync(microddp, [cmd, "--help"], { encoding: "utf8" });
    } catch (e) {
      problem(x.where, `\`microddp ${cmd} --help\` failed: ${e.message.split("\n")[0]}`);
      continue;
    }
    const known = new Set(help.match(/--[a-z0-9][a-z0-9-]*/g));
    for (const flag of flagsOf(c).keys())
      if (!known.has(flag)) problem(x.where, `${flag} is not a flag of \`microddp ${cmd}\``);
  }
}

for (const p of problems) console.log(p);
if (problems.length) process.exit(1);
console.log(`ok: ${objects.length} objects (${objects.map(({ o }) => o.kind).join(", ")}) in ${files.join(" ")}`);
