// ComfyUI's official frontend against `comfy-orch serve`, in Debian's Chromium driven by
// playwright-core (docs/serve.md, "The frontend"); run by run_frontend_test.py:
//
//   node frontend_test.mjs URL OUT_DIR COMFYUI_TREE [serve|launch]
//
// What a person does: open the page for the first time (serve: the template browser opens, with
// the official templates and the Python pack's example workflow, which loads), find the nodes in
// the library, load a workflow and press Run, watch the sampler's progress, the Python pack's
// node at work (its live preview, its progress text, the pack's script showing its messages and
// an image from the pack's route) and the preview image, see the job in the queue, save the
// workflow, change a setting and reload.
// Screenshots of each step go to OUT_DIR; every JSON answer and WebSocket message the page
// received goes to OUT_DIR/captured.json, which check_frontend_types checks against the
// frontend's published TypeScript types.
//
// `launch` (run_launch_frontend_test.py) is a real ComfyUI under `comfy-orch launch`: its own
// nodes stand where serve's native example packs do (workflow_launch.json), so the native
// nodes' checks are left out; the Python pack's are the same.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from '../npm/node_modules/playwright-core/index.mjs';
import { recordPackWebSide, checkPackWebSide } from './pack_web_side.mjs';

const [url, out, tree, mode = 'serve'] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const underServe = mode === 'serve';
const workflow = JSON.parse(readFileSync(
  join(here, underServe ? 'workflow.json' : 'workflow_launch.json'), 'utf8'));
const stepsNode = String(workflow.nodes.find((n) => n.type === 'BrowserSteps').id);
const stepCount = workflow.nodes.find((n) => n.type === 'BrowserSteps').widgets_values[0];

// What the page asks for that ComfyUI answers the same way without the optional packages a
// ComfyUI install may add (docs/serve.md, the route table): 404s, never failures of serve.
const tolerated = [
  /^\/user\.css$/, /^\/api\/userdata\/user\.css$/,          // no user stylesheet
  /^\/api\/userdata\/comfy\.templates\.json$/,              // no saved templates
  /^\/api\/userdata\?dir=(workflows|subgraphs)(&|$)/,      // no such directory yet
  // The templates' pictures: their media parts are not installed by default (docs/serve.md,
  // "Workflow templates"); under launch, a ComfyUI without the templates package at all.
  underServe ? /^\/templates\/[^?]*\.(webp|png|jpe?g|mp3|mp4)$/ : /^\/templates\//,
];
const failures = [];
const external = [];
const captured = { http: {}, ws: [] };

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
// The frontend checks api.comfy.org for releases: there is no network here, and it is none of
// serve's business. Refused, and listed.
await page.route((u) => !u.href.startsWith(url), (route) => {
  external.push(route.request().url());
  return route.abort();
});
page.on('pageerror', (e) => fail('page error: ' + e.message));
page.on('crash', () => fail('the page crashed'));
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  const text = m.text();
  // The browser's own line for a tolerated 404 or a refused external request, the frontend's
  // for a template's missing picture (serve) or for the missing templates package (launch).
  if (/^Failed to load resource|^Failed to fetch: 404$/.test(text)) return;
  if (!underServe && /Error loading core workflow templates/.test(text)) return;
  fail('console error: ' + text.slice(0, 400));
});
page.on('response', async (r) => {
  const path = r.url().slice(url.length);
  if (!r.url().startsWith(url)) return;
  if (r.status() >= 400 && !tolerated.some((t) => t.test(path)))
    fail(`${r.request().method()} ${path} answered ${r.status()}`);
  const type = r.headers()['content-type'] || '';
  if (type.startsWith('application/json') && r.status() < 400 && path.startsWith('/api/')) {
    try {
      captured.http[`${r.request().method()} ${path.split('?')[0]}`] = await r.json();
    } catch { /* a body the page abandoned: nothing to capture */ }
  }
});
page.on('requestfailed', async (r) => {
  if (!r.url().startsWith(url)) return;  // the refused external requests
  // One whose answer had arrived (checked above) and that the page then dropped unread.
  if ((await r.response()) !== null) return;
  fail(`${r.method()} ${r.url()} failed: ${r.failure()?.errorText}`);
});
page.on('websocket', (ws) => {
  ws.on('framereceived', (f) => {
    if (typeof f.payload !== 'string') return;
    const message = JSON.parse(f.payload);
    // The pack's own message is no part of ComfyUI's protocol, which the types describe.
    if (!String(message.type).startsWith('browserdemo.')) captured.ws.push(message);
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

// 0. A first visit opens the template browser, the first page a new user sees (serve: the
// official templates, the Python pack's example workflow, which loads; docs/serve.md, "Workflow
// templates"). Not under launch: the real ComfyUI tree there is not on its first visit.
async function checkTemplateBrowser() {
  const dialog = page.getByRole('dialog');
  const cards = dialog.locator(
    '[data-testid^="template-workflow-"]:not([data-testid="template-workflow-detail"])');
  await cards.first().waitFor({ timeout: 30000 })
    .catch(() => fail('a first visit shows no template'));
  await shot('0-templates');
  const shown = await cards.count();
  check(shown > 0, `a first visit opens the template browser with templates (${shown} shown)`);
  check(!(await dialog.getByText('No templates found').isVisible()),
        'the template browser does not say "No templates found"');
  const thumbnail = page.waitForResponse(
    (r) => r.url().endsWith('/api/workflow_templates/ComfyUI-BrowserDemo/browser_demo.jpg'),
    { timeout: 10000 }).catch(() => null);
  await dialog.getByText('ComfyUI-BrowserDemo', { exact: true }).click();
  const example = dialog.locator('[data-testid="template-workflow-browser_demo"]');
  await example.waitFor({ timeout: 10000 })
    .catch(() => fail('the Python pack\'s example workflow is not under Extensions'));
  const picture = await thumbnail;
  check(picture?.status() === 200 && picture.headers()['content-type'] === 'image/jpeg',
        'its thumbnail is served from the pack\'s example_workflows');
  await example.locator('img').first().evaluate(
    (i) => i.complete || new Promise((done) => { i.onload = i.onerror = done; }))
    .catch(() => {});
  check(await example.locator('img').first().evaluate((i) => i.naturalWidth > 0)
    .catch(() => false), 'the thumbnail shows on its card');
  await shot('0-templates-pack');
  await example.click();
  await page.waitForFunction(() => window.app.graph.nodes.some(
    (n) => n.type === 'BrowserTint' && n.widgets?.[0]?.value === 'blue'), null, { timeout: 10000 })
    .then(() => check(true, 'choosing it loads the pack\'s workflow'))
    .catch(() => fail('choosing the pack\'s example workflow did not load it'));
  await dialog.first().waitFor({ state: 'hidden', timeout: 10000 })
    .catch(() => page.keyboard.press('Escape'));
}

// 1. The page loads.
await open();
if (underServe) await checkTemplateBrowser();
await shot('1-loaded');
check(failures.length === 0, 'the page loads with no console error and no failed request');
check(await page.evaluate(() => window.orchBrowserDemoLoaded === true),
      'the Python pack\'s WEB_DIRECTORY script ran in the page');

// 2. The node library: a native node and a Python pack's node, with their widgets and outputs.
const nodes = await page.evaluate((native) => {
  const describe = (type) => {
    const n = window.LiteGraph.createNode(type);
    return { title: n.title,
             outputs: n.outputs.map((o) => o.label || o.name),
             widgets: Object.fromEntries(n.widgets.map((w) => [w.name, { value: w.value,
                                                                         options: w.options }])) };
  };
  return { solid: native ? describe('SolidImage') : null, tint: describe('BrowserTint'),
           steps: describe('BrowserSteps') };
}, underServe);
if (underServe) {
  check(nodes.solid.title === 'Solid Image', 'the native SolidImage is listed as "Solid Image"');
  check(nodes.solid.widgets.width.options.min === 1 &&
        nodes.solid.widgets.width.options.max === 4096,
        'its width widget has the pack\'s min and max');
}
check(nodes.tint.title === 'Browser Tint', 'the Python BrowserTint is listed as "Browser Tint"');
check(JSON.stringify(nodes.tint.widgets.colour.options.values) === '["red","green","blue"]',
      'its combo offers the pack\'s choices');
const amount = nodes.tint.widgets.amount.options;
check(amount.min === 0 && amount.max === 100 && amount.step2 === 5,
      'its INT widget has min 0, max 100 and step 5');
check(JSON.stringify(nodes.tint.outputs) === '["tinted","amount_used"]',
      'its outputs carry the pack\'s RETURN_NAMES');
check(nodes.steps.title === 'Browser Steps',
      'the Python BrowserSteps is listed as "Browser Steps"');
const command = (id) => page.evaluate((c) => window.app.extensionManager.command.execute(c), id);
await command('Workspace.ToggleSidebarTab.node-library');
await page.waitForTimeout(500);
await shot('2-node-library');
await command('Workspace.ToggleSidebarTab.node-library');

// 3. Load a workflow, press Run: progress on the sampler, the Python node's live preview,
// progress text, message and route (pack_web_side.mjs), the preview from /api/view.
await page.evaluate((w) => window.app.loadGraphData(w), workflow);
await command('Comfy.Canvas.FitView');  // the whole workflow in the running screenshot
await recordPackWebSide(page);
const swatchLoaded = page.waitForResponse(
  (r) => r.url().includes('/api/browserdemo/swatch?'), { timeout: 120000 });
const previewLoaded = page.waitForResponse(
  (r) => r.url().includes('/api/view?') && r.url().includes('browser_preview_') &&
         r.status() === 200, { timeout: 120000 });
const posted = page.waitForResponse((r) => r.url().endsWith('/api/prompt') &&
                                           r.request().method() === 'POST');
await page.getByRole('button', { name: 'Run', exact: true }).first().click();
const queued = await (await posted).json();
check(typeof queued.prompt_id === 'string', 'Run queued the workflow: ' + JSON.stringify(queued));
const sent = JSON.parse((await posted).request().postData());
check(sent.extra_data?.extra_pnginfo?.workflow?.nodes?.length === workflow.nodes.length,
      'the prompt carries the workflow in extra_pnginfo');
// Mid-node, for the screenshot: the pack's script has shown the node's second step (what the
// page saw while the node ran is recorded as it came, and checked below).
await page.waitForFunction(() => window.orchBrowserDemo.status.length >= 2, null,
                           { timeout: 120000 })
  .catch(() => fail('the pack\'s script never got the Python node\'s second step'));
await shot('3-running');
const view = await previewLoaded;
check(view.headers()['content-type'] === 'image/png', 'the preview is fetched from /api/view');
await page.waitForFunction(() => [...document.images].some(
  (i) => i.src.includes('browser_preview_') && i.complete && i.naturalWidth > 0),
  null, { timeout: 30000 }).catch(() => fail('the preview image never appeared in the page'));
await command('Comfy.Canvas.FitView');
await page.waitForTimeout(500);
await shot('4-finished');
const states = captured.ws.filter((m) => m.type === 'progress_state' &&
                                         m.data.prompt_id === queued.prompt_id);
// The native sampler's progress (serve), and the Python node's (its ProgressBar) on both.
for (const [type, what] of [['SimSampler', 'the sampler'], ['BrowserSteps', 'the Python node']]) {
  const node = workflow.nodes.find((n) => n.type === type);
  if (!node) continue;
  const id = String(node.id);
  check(states.some((m) => m.data.nodes[id]?.state === 'running' && m.data.nodes[id].value > 0),
        `progress_state showed ${what} running part-way`);
  check(states.some((m) => m.data.nodes[id]?.state === 'finished'),
        `progress_state showed ${what} finished`);
}
await checkPackWebSide(page, { check, fail, stepsNode, stepCount, swatch: await swatchLoaded });
check(captured.ws.some((m) => m.type === 'execution_success' &&
                              m.data.prompt_id === queued.prompt_id), 'the prompt succeeded');

// 4. The queue panel reads the jobs API: the finished job is there.
// What the queue panel asks; ComfyUI 0.8.0's jobs API has no `cancelled` (later ones do), and
// answers 400 to it.
const finished = underServe ? 'completed,failed,cancelled' : 'completed,failed';
const jobs = await page.evaluate(async (s) =>
  (await fetch(`/api/jobs?status=${s}&limit=64&offset=0`)).json(), finished);
check(jobs.jobs.some((j) => j.id === queued.prompt_id && j.status === 'completed' &&
                            j.preview_output?.filename?.startsWith('browser_preview_')),
      'the jobs API lists the finished job with its preview');
// The queue overlay's job list; the 1.35.9 frontend of ComfyUI 0.8.0 has none and lists the
// finished jobs' outputs in its assets sidebar tab, the name shortened in the middle.
const queuePanel = underServe ? 'Comfy.Queue.ToggleOverlay' : 'Workspace.ToggleSidebarTab.assets';
await command(queuePanel);
await page.getByText(underServe ? 'browser_preview_00000_.png' : /^browser_.*_00000_/).first()
  .waitFor({ timeout: 10000 })
  .then(() => check(true, 'the queue panel shows the finished job'))
  .catch(() => fail('the queue panel does not show the finished job'));
await shot('5-queue');
await command(queuePanel);

// 5. Save the workflow: it lands in the user's workflows directory.
const saving = command('Comfy.SaveWorkflow');
const name = page.locator('[role="dialog"] input').first();
await name.waitFor({ timeout: 10000 }).catch(async (e) => {
  await shot('debug-save');
  writeFileSync(join(out, 'debug-save.html'), await page.content());
  throw e;
});
await name.fill('orch-browser-test');
await page.keyboard.press('Enter');
await saving;
const saved = join(tree, 'user', 'default', 'workflows', 'orch-browser-test.json');
for (let i = 0; i < 100 && !existsSync(saved); ++i) await page.waitForTimeout(100);
check(existsSync(saved) &&
      JSON.parse(readFileSync(saved, 'utf8')).nodes.length === workflow.nodes.length,
      'saving wrote user/default/workflows/orch-browser-test.json');
await shot('6-saved');

// 6. A changed setting outlives a reload.
await page.evaluate(() => window.app.extensionManager.setting.set('Comfy.Graph.ZoomSpeed', 1.3));
await open();
const zoom = await page.evaluate(
  () => window.app.extensionManager.setting.get('Comfy.Graph.ZoomSpeed'));
check(zoom === 1.3, 'a changed setting is kept across a reload (' + zoom + ')');
await shot('7-reloaded');

writeFileSync(join(out, 'captured.json'), JSON.stringify(captured, null, 1));
await browser.close();
console.log(`external requests refused: ${external.length} (${[...new Set(external.map(
  (u) => new URL(u).host))].join(', ')})`);
if (failures.length) {
  console.error(`${failures.length} check(s) failed; screenshots in ${out}`);
  process.exit(1);
}
console.log('all checks passed; screenshots in ' + out);
