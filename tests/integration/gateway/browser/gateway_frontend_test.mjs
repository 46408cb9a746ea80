// ComfyUI's official frontend against `comfy-orch gateway` in front of two serve hosts, in
// Debian's Chromium driven by playwright-core (docs/fleet.md, "The frontend at the gateway");
// run by run_gateway_frontend_test.py, which has made BUSY_HOST busy with a long prompt first:
//
//   node gateway_frontend_test.mjs URL OUT_DIR BUSY_HOST
//
// What a person does at the gateway's address: open the page (its frontend, the packs' scripts
// from /extensions and their node classes from a host), load the serve browser test's workflow
// and press Run; the prompt lands on the host that is not busy, and the page shows the sampler's
// progress, its live previews, the pack's own messages and route, and the output image
// (/api/view at the gateway); the queue panel's jobs API lists it; a changed setting outlives a
// reload (the gateway's user directory). Screenshots go to OUT_DIR.
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from '../../serve/npm/node_modules/playwright-core/index.mjs';

const [url, out, busyHost] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const workflow = JSON.parse(readFileSync(join(here, '../../serve/browser/workflow.json'), 'utf8'));

// What ComfyUI answers with a 404 too (frontend_test.mjs's list): never failures of the gateway.
const tolerated = [
  /^\/user\.css$/, /^\/api\/userdata\/user\.css$/,
  /^\/api\/userdata\/comfy\.templates\.json$/,
  /^\/api\/userdata\?dir=(workflows|subgraphs)(&|$)/,
  /^\/templates\/[^?]*\.(webp|png|jpe?g|mp3|mp4)$/,
];
const failures = [];
const external = [];
const ws = [];

function fail(what) {
  failures.push(what);
  console.error('FAIL: ' + what);
}

function check(ok, what) {
  if (!ok) fail(what);
  else console.log('ok: ' + what);
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium',
                                        args: ['--no-sandbox', '--disable-dev-shm-usage'] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
await page.route((u) => !u.href.startsWith(url), (route) => {
  external.push(route.request().url());
  return route.abort();
});
page.on('pageerror', (e) => fail('page error: ' + e.message));
page.on('crash', () => fail('the page crashed'));
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  const text = m.text();
  if (/^Failed to load resource|^Failed to fetch: 404$/.test(text)) return;
  fail('console error: ' + text.slice(0, 400));
});
page.on('response', (r) => {
  if (!r.url().startsWith(url)) return;
  const path = r.url().slice(url.length);
  if (r.status() >= 400 && !tolerated.some((t) => t.test(path)))
    fail(`${r.request().method()} ${path} answered ${r.status()}`);
});
page.on('requestfailed', async (r) => {
  if (!r.url().startsWith(url)) return;
  if ((await r.response()) !== null) return;
  fail(`${r.method()} ${r.url()} failed: ${r.failure()?.errorText}`);
});
page.on('websocket', (socket) => {
  socket.on('framereceived', (f) => {
    if (typeof f.payload === 'string') ws.push(JSON.parse(f.payload));
  });
});

async function open() {
  await page.goto(url);
  await page.waitForFunction(
    () => window.app?.graph && window.LiteGraph?.registered_node_types?.BrowserTint,
    null, { timeout: 60000 });
  await page.waitForTimeout(1500);  // the requests the page makes after it has drawn
}

async function shot(name) {
  await page.screenshot({ path: join(out, name + '.png') });
}

// 1. The page loads from the gateway: its frontend, the node classes a host has, the pack's
// script from /extensions (proxied to a host).
await open();
await shot('1-loaded');
check(failures.length === 0, 'the page loads with no console error and no failed request');
check(await page.evaluate(() => window.orchBrowserDemoLoaded === true),
      'the pack\'s WEB_DIRECTORY script, from a host through the gateway, ran in the page');
const titles = await page.evaluate(() => ({
  sampler: window.LiteGraph.createNode('SimSampler')?.title,
  tint: window.LiteGraph.createNode('BrowserTint')?.title,
}));
check(titles.tint === 'Browser Tint' && typeof titles.sampler === 'string',
      'the node library has the native and the Python pack\'s nodes');
const stats = await page.evaluate(async () => (await fetch('/api/system_stats')).json());
check(stats.devices.length === 2 &&
      stats.devices.every((d) => d.name.startsWith(d.orch_host + ': ')),
      'system_stats lists both hosts\' devices: ' + stats.devices.map((d) => d.name).join(', '));

// 2. Run the workflow: it lands on the host that is not busy; its progress and output show.
await page.evaluate((w) => window.app.loadGraphData(w), workflow);
const command = (id) => page.evaluate((c) => window.app.extensionManager.command.execute(c), id);
await command('Comfy.Canvas.FitView');
const previewLoaded = page.waitForResponse(
  (r) => r.url().includes('/api/view?') && r.url().includes('browser_preview_'),
  { timeout: 180000 }).catch(() => null);
// What the frontend makes of the host's binary frames, relayed by the gateway: previews (with
// their metadata, as the page asked) and progress texts.
await page.evaluate(() => {
  const seen = { previews: [], texts: [] };
  window.orchGatewaySaw = seen;
  window.app.api.addEventListener('b_preview_with_metadata', ({ detail }) =>
    seen.previews.push({ node: String(detail.displayNodeId), size: detail.blob.size }));
  window.app.api.addEventListener('progress_text', ({ detail }) =>
    seen.texts.push({ node: String(detail.nodeId), text: detail.text }));
});
const swatchLoaded = page.waitForResponse(
  (r) => r.url().includes('/api/browserdemo/swatch?'), { timeout: 180000 }).catch(() => null);
const posted = page.waitForResponse((r) => r.url().endsWith('/api/prompt') &&
                                           r.request().method() === 'POST');
await page.getByRole('button', { name: 'Run', exact: true }).first().click();
const queued = await (await posted).json();
check(typeof queued.prompt_id === 'string', 'Run queued the workflow: ' + JSON.stringify(queued));
// Mid-prompt, for the screenshot: the page has heard a node of it running part-way.
const partWay = (m) => m.type === 'progress_state' && m.data?.prompt_id === queued.prompt_id &&
  Object.values(m.data.nodes).some((n) => n.state === 'running' && n.value > 0);
for (const until = Date.now() + 180000; Date.now() < until && !ws.some(partWay);)
  await page.waitForTimeout(100);
await shot('2-running');
// The prompt's end, as the page hears it (relayed by the gateway with its prompt id); the bound
// is a hang guard.
const deadline = Date.now() + 180000;
while (Date.now() < deadline &&
       !ws.some((m) => m.type === 'executing' && m.data?.prompt_id === queued.prompt_id &&
                       m.data.node === null))
  await page.waitForTimeout(200);
await shot('3-finished');
const fleet = await page.evaluate(async () => (await fetch('/orch/fleet')).json());
const ranOn = fleet.decisions.filter((d) => d.prompt_id === queued.prompt_id &&
                                            d.decision === 'run').map((d) => d.host).pop();
check(ranOn !== undefined && ranOn !== busyHost,
      `the prompt ran on ${ranOn}, not on the busy ${busyHost}`);
check(ws.some((m) => m.type === 'execution_success' && m.data.prompt_id === queued.prompt_id),
      'the prompt succeeded');
const states = ws.filter((m) => m.type === 'progress_state' &&
                                m.data.prompt_id === queued.prompt_id);
for (const [type, what] of [['SimSampler', 'the sampler'], ['BrowserSteps', 'the Python node']]) {
  const id = String(workflow.nodes.find((n) => n.type === type).id);
  check(states.some((m) => m.data.nodes[id]?.state === 'running' && m.data.nodes[id].value > 0),
        `progress_state showed ${what} running part-way`);
  check(states.some((m) => m.data.nodes[id]?.state === 'finished'),
        `progress_state showed ${what} finished`);
}
// The pack's own message (its node's send_sync, relayed to the page by the gateway) reached the
// pack's script, which fetched a swatch from the pack's own route (proxied to a host).
const stepCount = workflow.nodes.find((n) => n.type === 'BrowserSteps').widgets_values[0];
const heard = await page.evaluate(() => window.orchBrowserDemo.status.length);
check(heard === stepCount, `the pack's script heard its node's ${heard} of ${stepCount} steps`);
const swatch = await swatchLoaded;
check(swatch !== null && swatch.status() === 200,
      'the pack\'s script fetched its swatch from the pack\'s route through the gateway' +
      (swatch ? ` (answered ${swatch.status()} ${swatch.headers()['content-type']})` : ''));
const saw = await page.evaluate(() => window.orchGatewaySaw);
const stepsNode = String(workflow.nodes.find((n) => n.type === 'BrowserSteps').id);
check(saw.previews.some((p) => p.node === stepsNode && p.size > 0),
      `the Python node's live previews reached the page (${saw.previews.length})`);
check(saw.texts.some((t) => t.node === stepsNode && t.text.length > 0),
      `its progress texts reached the page (${saw.texts.length})`);
// The output image, from the gateway's /view (its copy of the host's output).
const view = await previewLoaded;
check(view !== null && view.status() === 200 && view.headers()['content-type'] === 'image/png',
      'the output image is fetched from the gateway\'s /api/view' +
      (view ? ` (answered ${view.status()})` : ' (never asked)'));
// Shown where the page shows it: the preview node's image on the canvas (node.imgs, drawn by
// the graph), or an <img> of the queue panel (which shows the busy host's job here).
const outputShown = () => {
  const loaded = (i) => i.src.includes('browser_preview_') && i.complete && i.naturalWidth > 0;
  return window.app.graph._nodes.some((n) => (n.imgs || []).some(loaded)) ||
         [...document.images].some(loaded);
};
await page.waitForFunction(outputShown, null, { timeout: 30000 })
  .then(() => check(true, 'the output image shows in the page'))
  .catch(() => fail('the output image never appeared in the page'));
await shot('4-output');

// 3. The queue panel's jobs API lists the finished job, under the gateway's id.
const jobs = await page.evaluate(async () =>
  (await fetch('/api/jobs?status=completed,failed,cancelled&limit=64&offset=0')).json());
check(jobs.jobs.some((j) => j.id === queued.prompt_id && j.status === 'completed' &&
                            j.preview_output?.filename?.startsWith('browser_preview_')),
      'the jobs API lists the finished job with its preview');

// 4. A changed setting outlives a reload: kept in the gateway's user directory.
await page.evaluate(() => window.app.extensionManager.setting.set('Comfy.Graph.ZoomSpeed', 1.3));
await open();
const zoom = await page.evaluate(
  () => window.app.extensionManager.setting.get('Comfy.Graph.ZoomSpeed'));
check(zoom === 1.3, 'a changed setting is kept across a reload (' + zoom + ')');
await shot('5-reloaded');

await browser.close();
console.log(`external requests refused: ${external.length}`);
if (failures.length) {
  console.error(`${failures.length} check(s) failed; screenshots in ${out}`);
  process.exit(1);
}
console.log('all checks passed; screenshots in ' + out);
