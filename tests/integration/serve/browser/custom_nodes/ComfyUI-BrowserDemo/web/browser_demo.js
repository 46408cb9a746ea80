// The pack's frontend extension, loaded by the page from /extensions/ComfyUI-BrowserDemo/ as
// ComfyUI serves a pack's WEB_DIRECTORY. It does what a real pack's script does with its Python
// side: it listens for the message its node sends while it runs (`browserdemo.status`) and shows
// the colour that message reports as a swatch fetched from the pack's own route. What it saw is
// kept on window.orchBrowserDemo for the browser test to read.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const seen = { loaded: false, status: [], swatch: null };
window.orchBrowserDemo = seen;

// A small box in the page's corner: the node's last step and the swatch of its colour.
function box() {
  let el = document.getElementById("browserdemo-box");
  if (!el) {
    el = document.createElement("div");
    el.id = "browserdemo-box";
    el.style.cssText = "position:fixed;left:8px;bottom:8px;z-index:10000;padding:4px 8px;" +
                       "background:#222;color:#eee;font:12px sans-serif;display:flex;gap:6px;" +
                       "align-items:center";
    el.innerHTML = '<span id="browserdemo-text"></span>' +
                   '<img id="browserdemo-swatch" alt="" width="24" height="24">';
    document.body.appendChild(el);
  }
  return el;
}

app.registerExtension({
  name: "orch.BrowserDemo",
  async setup() {
    // ComfyUI dispatches a message type it does not know only to a listener registered for it.
    api.addEventListener("browserdemo.status", ({ detail }) => {
      seen.status.push(detail);
      box().querySelector("#browserdemo-text").textContent =
        `node ${detail.node}: step ${detail.step} of ${detail.steps}`;
      if (seen.swatch !== detail.colour) {
        seen.swatch = detail.colour;
        // api.apiURL: the route under the server's /api prefix, as ComfyUI serves each route.
        box().querySelector("#browserdemo-swatch").src =
          api.apiURL(`/browserdemo/swatch?colour=${encodeURIComponent(detail.colour)}`);
      }
    });
    seen.loaded = true;
    window.orchBrowserDemoLoaded = true;
  },
});
