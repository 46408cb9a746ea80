// Drives a live `comfy-orch serve` with two third-party ComfyUI clients from npm, as their own
// READMEs use them: each queues the prompt, follows it over the WebSocket, waits for the end the
// way the library does, and reads the history and the outputs (docs/serve.md).
//
//   node clients.mjs <host:port> <prompt.json> stable-canvas|saintno
//
// Prints "ok: ..." and exits 0 when every check held; prints the failure and exits 1 otherwise.
import { readFileSync } from "node:fs";
import WebSocket from "ws";

const [address, promptFile, which] = process.argv.slice(2);
const prompt = JSON.parse(readFileSync(promptFile, "utf8"));
const outputNode = Object.keys(prompt).find((id) => prompt[id].class_type === "ImageChecksum");

function check(cond, message) {
  if (!cond) throw new Error(message);
}

async function stableCanvas() {
  const { Client } = await import("@stable-canvas/comfyui-client");
  const client = new Client({ api_host: address, WebSocket });
  try {
    await client.connect({ timeout_ms: 15000 });
    const stats = await client.getSystemStats();
    check(Array.isArray(stats.devices) && stats.devices.length > 0, "system_stats has no devices");
    const defs = await client.getNodeDefs();
    for (const node of Object.values(prompt))
      check(node.class_type in defs, `object_info lacks ${node.class_type}`);
    let progress = 0;
    const result = await client.enqueue(prompt, {
      progress: () => progress++,
      timeout_ms: 60000,
    });
    check(typeof result.prompt_id === "string", "enqueue gave no prompt_id");
    // The library resolves at the first executed event; the history follows the prompt's end.
    await client.waitForPrompt(result.prompt_id, 50, 60000);
    const outputs = await client.getPromptOutputs(result.prompt_id);
    check(outputNode in outputs, `history outputs lack node ${outputNode}: ${JSON.stringify(outputs)}`);
    const queue = await client.getQueue();
    check(queue.Running.length === 0 && queue.Pending.length === 0, "queue not empty");
    return `stable-canvas: prompt ${result.prompt_id}, ${progress} progress events`;
  } finally {
    client.close();
  }
}

async function saintno() {
  const { ComfyApi, CallWrapper, PromptBuilder } = await import("@saintno/comfyui-sdk");
  const api = new ComfyApi(`http://${address}`, "comfy-orch-test", { wsImpl: WebSocket });
  try {
    await api.init(20, 500).waitForReady();
    const builder = new PromptBuilder(prompt, [], ["checksum"]).setOutputNode("checksum", outputNode);
    let progress = 0;
    let started = false;
    const finished = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no result within 60 s")), 60000);
      new CallWrapper(api, builder)
        .onStart(() => { started = true; })
        .onProgress(() => { progress++; })
        .onFinished((data, promptId) => { clearTimeout(timer); resolve({ data, promptId }); })
        .onFailed((err) => { clearTimeout(timer); reject(err); })
        .run();
    });
    check(started, "onStart never ran");
    check(finished.data && "checksum" in finished.data,
          `onFinished gave ${JSON.stringify(finished.data)}`);
    const id = finished.promptId;
    check(typeof id === "string", "onFinished gave no prompt id");
    const history = await api.getHistory(id);
    check(history && history.status && history.status.completed === true,
          `history of ${id}: ${JSON.stringify(history)}`);
    return `saintno: prompt ${id}, ${progress} progress events`;
  } finally {
    api.destroy();
  }
}

try {
  const line = which === "saintno" ? await saintno() : await stableCanvas();
  console.log("ok: " + line);
  process.exit(0);
} catch (e) {
  console.log("FAIL: " + (e && e.stack ? e.stack : e));
  process.exit(1);
}
