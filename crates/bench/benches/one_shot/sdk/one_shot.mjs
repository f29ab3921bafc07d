// One scripted one-shot task through @openai/codex-sdk, for the one_shot bench.
// Usage: node one_shot.mjs PROMPT, with CODEX_BIN (the pinned Codex), CODEX_HOME and WORKDIR set.
import { Codex } from "@openai/codex-sdk";

const codex = new Codex({ codexPathOverride: process.env.CODEX_BIN });
const thread = codex.startThread({
  workingDirectory: process.env.WORKDIR,
  skipGitRepoCheck: true,
  sandboxMode: "read-only",
  approvalPolicy: "never",
});
const turn = await thread.run(process.argv[2]);
console.log(turn.finalResponse);
