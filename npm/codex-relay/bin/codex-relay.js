#!/usr/bin/env node
// The `codex-relay` command of the npm package: starts the prebuilt codex-relay binary of this
// platform (from the optional dependency `@codex-relay/<platform>`) with the same arguments,
// the same stdin/stdout/stderr, the signals it receives, and exits as the binary did. When no
// Codex is named (CODEX_CLI_PATH) and none is on PATH, the binary is given the Codex this
// package depends on. Node's own modules only. The contract is in docs/INSTALL.md.
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const manifest = require("../package.json");

/** Signals passed on to the binary; each is sent as often as it arrives. */
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"];
/** Exit status when there is no binary to start (the shell's "command not found"). */
const EXIT_NO_BINARY = 127;
/** Exit status when the binary exists but cannot be executed. */
const EXIT_NOT_EXECUTABLE = 126;

const platform = `${process.platform}-${process.arch}`;
const platformPackage = `@codex-relay/${platform}`;

function fail(code, lines) {
  process.stderr.write(lines.map((l) => `codex-relay: ${l}\n`).join(""));
  process.exit(code);
}

function repositoryUrl() {
  const repo = manifest.repository;
  const url = typeof repo === "string" ? repo : repo && repo.url;
  return (url || "").replace(/^git\+/, "").replace(/\.git$/, "");
}

function fromSourceAdvice() {
  return [
    "To build it from source (needs a Rust toolchain, https://rustup.rs):",
    `  git clone ${repositoryUrl() || "<the codex-relay repository>"} && cd codex-relay`,
    "  cargo install --path crates/codex-relay",
    "then run `codex-relay` from ~/.cargo/bin (an MCP client's command becomes that path).",
  ];
}

/** The binary inside this platform's package, or a reason there is none. */
function relayBinary() {
  const supported = Object.keys(manifest.optionalDependencies || {})
    .filter((name) => name.startsWith("@codex-relay/"))
    .map((name) => name.slice("@codex-relay/".length));
  if (!supported.includes(platform)) {
    fail(EXIT_NO_BINARY, [
      `no prebuilt binary for this platform (${platform}); there are binaries for ${supported.join(", ")}.`,
      ...fromSourceAdvice(),
    ]);
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${platformPackage}/package.json`));
  } catch {
    fail(EXIT_NO_BINARY, [
      `the binary for ${platform} comes in the optional package ${platformPackage}`,
      `(${manifest.optionalDependencies[platformPackage]}), and it is not installed.`,
      "npm leaves optional packages out with --omit=optional (or --no-optional), or when their",
      `download failed: install again without that (npx -y codex-relay@${manifest.version},`,
      `npm install codex-relay@${manifest.version}). npm also skips it on a Linux without glibc`,
      "(musl, as on Alpine): the Linux binaries are built for glibc.",
      ...fromSourceAdvice(),
    ]);
  }
  const binary = path.join(dir, "bin", "codex-relay");
  if (!fs.existsSync(binary)) {
    fail(EXIT_NO_BINARY, [
      `${platformPackage} is installed at ${dir} but holds no bin/codex-relay; reinstall codex-relay.`,
      ...fromSourceAdvice(),
    ]);
  }
  checkGlibc(dir);
  return binary;
}

/** `a` < `b` for dotted version numbers ("2.31" < "2.34"). */
function older(a, b) {
  const x = a.split(".").map(Number);
  const y = b.split(".").map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) < (y[i] || 0);
  }
  return false;
}

/**
 * The Linux binaries need the glibc they were built against or newer (the platform package
 * records it: `codexRelay.glibc`). On an older one (Ubuntu 20.04, Debian 11, RHEL 8) the loader
 * would refuse it with exit 1 and a line about `GLIBC_2.34`; this says what to do instead.
 */
function checkGlibc(dir) {
  let needed;
  try {
    const meta = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
    needed = meta.codexRelay && meta.codexRelay.glibc;
  } catch {
    return;
  }
  if (!needed || process.platform !== "linux") return;
  let runtime;
  try {
    runtime = process.report.getReport().header.glibcVersionRuntime;
  } catch {
    return;
  }
  if (runtime && older(runtime, needed)) {
    fail(EXIT_NO_BINARY, [
      `the prebuilt binary for ${platform} needs glibc ${needed} or newer, and this system has glibc ${runtime}`,
      "(Ubuntu 22.04, Debian 12, RHEL 9 and later have it; Ubuntu 20.04, Debian 11 and RHEL 8 do not).",
      ...fromSourceAdvice(),
    ]);
  }
}

/** The executable `name` in a PATH directory, skipping the file `skip` (a real path). */
function onPath(name, skip) {
  for (const dir of (process.env.PATH || "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (!fs.statSync(candidate).isFile()) continue;
      if (skip && fs.realpathSync(candidate) === skip) continue;
      return candidate;
    } catch {
      // Not there, or not executable: the next directory.
    }
  }
  return null;
}

/** The `codex` command of the `@openai/codex` this package depends on (a real path), if installed. */
function bundledCodex() {
  try {
    const manifestPath = require.resolve("@openai/codex/package.json");
    const codex = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
    const bin = typeof codex.bin === "string" ? codex.bin : codex.bin && codex.bin.codex;
    if (!bin) return null;
    return fs.realpathSync(path.join(path.dirname(manifestPath), bin));
  } catch {
    return null;
  }
}

/**
 * The binary's environment: ours, plus CODEX_CLI_PATH when it is unset. A `codex` on PATH
 * wins over the bundled one, even when npx or `npm exec` put the bundled one first on PATH
 * (their node_modules/.bin holds it), so it is named explicitly.
 */
function childEnv() {
  const env = { ...process.env };
  if (env.CODEX_CLI_PATH) return env;
  const bundled = bundledCodex();
  const own = onPath("codex", bundled);
  if (own) {
    env.CODEX_CLI_PATH = own;
  } else if (bundled) {
    env.CODEX_CLI_PATH = bundled;
    // The bundled `codex` is itself a Node script (`#!/usr/bin/env node`).
    if (!onPath("node", null)) {
      env.PATH = [env.PATH, path.dirname(process.execPath)].filter(Boolean).join(path.delimiter);
    }
  }
  return env;
}

/** The parent of process `pid` (Linux's /proc), or 0 when it cannot be read. */
function parentOf(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) || 0;
  } catch {
    return 0;
  }
}

/** Whether process `pid` still runs (a zombie waiting to be reaped does not). */
function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

function main() {
  const binary = relayBinary();
  // stdio is inherited, not piped: the binary reads and writes the same descriptors, so MCP
  // over stdio and `run`'s output reach it byte for byte, and a terminal stays a terminal.
  const env = childEnv();
  // The binary asks the kernel for SIGTERM when this process dies, even by SIGKILL.
  env.CODEX_RELAY_LAUNCHER_PID = String(process.pid);
  const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", env });

  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill(signal);
      } catch {
        // It exited meanwhile; its exit is handled below.
      }
    }
  };
  for (const signal of FORWARDED) process.on(signal, forward);

  // npx (`npm exec`) starts us through `sh -c`, and forwards its own SIGTERM/SIGINT to that
  // shell; Debian's sh (dash) dies of SIGTERM without passing it on, and outlives npm when npm
  // itself is killed (SIGKILL, SIGHUP). There, the end of the shell or of npm counts as
  // SIGTERM. (A SIGINT sent to npm alone reaches only the shell, which waits: see
  // docs/INSTALL.md.)
  if (process.env.npm_command === "exec") {
    const parent = process.ppid;
    const npm = parentOf(parent);
    const watch = setInterval(() => {
      if (process.ppid !== parent || (npm > 1 && !alive(npm))) {
        clearInterval(watch);
        forward("SIGTERM");
      }
    }, 200);
    watch.unref();
    child.on("exit", () => clearInterval(watch));
  }

  child.on("error", (err) => {
    const denied = err.code === "EACCES";
    fail(denied ? EXIT_NOT_EXECUTABLE : EXIT_NO_BINARY, [
      `could not start ${binary}: ${err.message}`,
      ...(err.code === "ENOENT"
        ? [`the file is there, so this system may lack what it was built for (${platform}, glibc on Linux).`]
        : []),
      ...fromSourceAdvice(),
    ]);
  });

  child.on("exit", (code, signal) => {
    if (signal === null) {
      process.exit(code);
    }
    // Die of the same signal, so whoever started us sees what they would have seen with the
    // binary itself; if the signal is ignored here, exit as a shell reports a signal death.
    for (const s of FORWARDED) process.removeAllListeners(s);
    process.exitCode = 128 + (os.constants.signals[signal] || 0);
    process.kill(process.pid, signal);
  });
}

main();
