// The pack's frontend extension, loaded by the page from /extensions/ComfyUI-BrowserDemo/ as
// ComfyUI serves a pack's WEB_DIRECTORY: it says so on the window once the app has set it up.
import { app } from "../../scripts/app.js";

app.registerExtension({
  name: "orch.BrowserDemo",
  async setup() {
    window.orchBrowserDemoLoaded = true;
  },
});
