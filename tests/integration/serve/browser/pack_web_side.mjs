// A pack's web side as the page sees it, for frontend_test.mjs (docs/comfyui.md, "A pack's web
// side"): the BrowserDemo pack's BrowserSteps node runs in its worker and, at each step, sends
// its progress text, a ProgressBar preview and a `browserdemo.status` message, which the pack's
// script (web/browser_demo.js) shows with a swatch fetched from the pack's own route.
//
// recordPackWebSide listens, in the page and before Run, to what the frontend dispatches from
// the WebSocket, noting for each preview and text which node was executing when it came and
// what the frontend made of it at once; checkPackWebSide then checks it all. Nothing here waits
// a fixed time: each wait is for a condition, with a generous bound.

export async function recordPackWebSide(page) {
  await page.evaluate(() => {
    const api = window.app.api;
    const seen = { executing: [], previews: [], texts: [] };
    window.orchPageSaw = seen;
    let running = null;  // the node of the last `executing`, as the frontend's own state follows
    api.addEventListener('executing', ({ detail }) => {
      running = detail == null ? null : String(detail);
      seen.executing.push(running);
    });
    // The app's own listeners were registered when it started, before these, so each of these
    // runs after the frontend has handled the same event.
    api.addEventListener('b_preview_with_metadata', ({ detail }) => {
      const node = String(detail.displayNodeId);
      const entry = { node, running, type: detail.blob.type, size: detail.blob.size,
                      // the node's preview is the image just received, as a blob: URL
                      onNode: (window.app.nodePreviewImages?.[node] ?? [])
                        .some((u) => String(u).startsWith('blob:')) };
      seen.previews.push(entry);
      createImageBitmap(detail.blob).then(
        (b) => { entry.width = b.width; entry.height = b.height; },
        (e) => { entry.error = String(e); });
    });
    api.addEventListener('progress_text', ({ detail }) => {
      const node = String(detail.nodeId);
      // The frontend shows the text in a widget of the node's (useNodeProgressText).
      const shown = window.app.graph.getNodeById(Number(node))?.widgets
        ?.find((w) => w.name === '$$node-text-preview')?.value;
      seen.texts.push({ node, running, text: detail.text, shown });
    });
  });
}

export async function checkPackWebSide(page, { check, fail, stepsNode, stepCount, swatch }) {
  const last = `step ${stepCount} of ${stepCount}`;
  // Everything the node sent has arrived once its last text has, and each preview decoded.
  await page.waitForFunction(({ id, last }) => {
    const seen = window.orchPageSaw;
    return seen.texts.some((t) => t.node === id && t.text === last) &&
           seen.previews.every((p) => 'width' in p || 'error' in p);
  }, { id: stepsNode, last }, { timeout: 60000 })
    .catch(() => fail('the Python node\'s last progress text or a preview never arrived'));
  const seen = await page.evaluate(() => window.orchPageSaw);
  const demo = await page.evaluate(() => window.orchBrowserDemo);

  // (a) Its live preview, while it ran.
  const previews = seen.previews.filter((p) => p.node === stepsNode);
  console.log(`  previews of node ${stepsNode}: ${JSON.stringify(previews)}`);
  check(previews.length > 0 && previews.every((p) => p.running === stepsNode),
        'the Python node\'s ProgressBar previews arrived while it was the executing node');
  check(previews.length > 0 && previews.every((p) => p.type === 'image/jpeg' && p.width > 0 &&
                                                     p.height > 0),
        'each preview is a JPEG the browser decodes');
  check(previews.length > 0 && previews.every((p) => p.onNode),
        'the frontend set each preview as the node\'s preview image');

  // (b) Its progress text, shown on the node.
  const texts = seen.texts.filter((t) => t.node === stepsNode);
  console.log(`  progress texts of node ${stepsNode}: ${JSON.stringify(texts)}`);
  check(JSON.stringify(texts.map((t) => t.text)) ===
        JSON.stringify([...Array(stepCount)].map((_, i) => `step ${i + 1} of ${stepCount}`)),
        'the Python node\'s progress text came at each step, in order');
  check(texts.length > 0 && texts.every((t) => t.running === stepsNode && t.shown === t.text),
        'the frontend showed each text on the node while it ran');

  // (c) Its message, at the pack's own listener.
  const mine = demo.status.filter((m) => String(m.node) === stepsNode);
  check(JSON.stringify(mine.map((m) => m.step)) ===
        JSON.stringify([...Array(stepCount)].map((_, i) => i + 1)) &&
        mine.every((m) => m.steps === stepCount && /^[0-9a-f]{6}$/.test(m.colour)),
        'the pack\'s script got browserdemo.status at each step: ' +
        JSON.stringify(demo.status));
  check(await page.evaluate(() => document.getElementById('browserdemo-text')?.textContent) ===
        `node ${stepsNode}: ${last}`, 'the pack\'s script showed the last step in the page');

  // (d) An image the pack's script fetched from the pack's own route, in the worker.
  check(swatch.status() === 200 && swatch.headers()['content-type'] === 'image/png',
        `the pack's route answered its image (${swatch.status()} ` +
        `${swatch.headers()['content-type']})`);
  const pixel = await page.waitForFunction(() => {
    const img = document.getElementById('browserdemo-swatch');
    if (!img?.complete || !(img.naturalWidth > 0)) return null;
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext('2d');
    context.drawImage(img, 0, 0);
    const [r, g, b] = context.getImageData(1, 1, 1, 1).data;
    return { width: img.naturalWidth,
             colour: [r, g, b].map((c) => c.toString(16).padStart(2, '0')).join('') };
  }, null, { timeout: 30000 }).then((h) => h.jsonValue()).catch(() => null);
  check(pixel !== null && pixel.width > 0 && mine.length > 0 && pixel.colour === mine[0].colour,
        `the route's image loaded in the page, the colour the node reported ` +
        `(${JSON.stringify(pixel)})`);
}
