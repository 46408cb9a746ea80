// Checks what the page received from serve (frontend_test.mjs's captured.json) against the
// frontend's own published TypeScript types, @comfyorg/comfyui-frontend-types (docs/serve.md,
// "The frontend"): each JSON answer and WebSocket message becomes a typed constant of a generated
// file, which tsc --strict compiles or rejects.
//
//   node check_frontend_types.mjs CAPTURED_JSON OUT_DIR
//
// The types are reached through the ComfyApi class the package exports: its methods' results for
// the HTTP answers, its addEventListener's event details for the WebSocket messages. A value is
// first given its inferred type and then assigned, so fields the types do not know (orch_env,
// orch_processes) are allowed and every field they do know must have their type.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const [capturedFile, out] = process.argv.slice(2);
const npm = join(dirname(fileURLToPath(import.meta.url)), '..', 'npm', 'node_modules');
const captured = JSON.parse(readFileSync(capturedFile, 'utf8'));

// HTTP answers: the ComfyApi method whose result types the route's answer.
const routes = {
  'GET /api/system_stats': 'Awaited<ReturnType<ComfyApi["getSystemStats"]>>',
  // Settings lists every setting; ComfyUI answers only those the user stored.
  'GET /api/settings': 'Partial<Awaited<ReturnType<ComfyApi["getSettings"]>>>',
  'GET /api/users': 'Awaited<ReturnType<ComfyApi["getUserConfig"]>>',
  'GET /api/extensions': 'Awaited<ReturnType<ComfyApi["getExtensions"]>>',
  'GET /api/global_subgraphs': 'Awaited<ReturnType<ComfyApi["getGlobalSubgraphs"]>>',
  'GET /api/i18n': 'Awaited<ReturnType<ComfyApi["getCustomNodesI18n"]>>',
  // PromptResponse makes `error` required, which ComfyUI's answer to a queued prompt lacks.
  'POST /api/prompt': 'Omit<PromptResponse, "error">',
  'GET /api/jobs': '{ jobs: Job[]; pagination: { offset: number; limit: number | null; ' +
                   'total: number; has_more: boolean } }',
};
// WebSocket messages: the event the frontend dispatches, and what of the message is its detail
// (comfyui-frontend-types' ApiToEventType: status's detail is data.status, executing's
// data.node, every other event's the whole data).
const detailOf = { status: (d) => d.status, executing: (d) => d.node };

let source = `import type { ComfyApi, PromptResponse } from '@comfyorg/comfyui-frontend-types';
declare const api: ComfyApi;
type Job = Awaited<ReturnType<ComfyApi['getHistory']>>[number];
type Listener<L> = NonNullable<L> extends (event: CustomEvent<infer D>) => void ? D : never;
// A JSON literal "as const" keeps its strings' literal types ("server", "completed"); this makes
// it mutable again (tuples included), as the types declare their fields, and not fresh, so
// fields the types do not name are allowed while every field they name is checked.
type Mutable<T> = T extends object ? { -readonly [K in keyof T]: Mutable<T[K]> } : T;
function value<T>(literal: T): Mutable<T> { return literal as unknown as Mutable<T>; }
// A type that is \`any\` or \`unknown\` checks nothing: each one checked must be neither.
type Checked<T> = 0 extends 1 & T ? 'unchecked' : unknown extends T ? 'unchecked' : 'checked';
`;
// What the page must have received for the check to mean anything.
const missing = Object.keys(routes).filter((r) => !(r in captured.http));
for (const type of ['status', 'executing', 'progress_state', 'execution_success',
                    'feature_flags']) {
  if (!captured.ws.some((m) => m.type === type)) missing.push(`the WebSocket's ${type}`);
}
if (missing.length) {
  console.error(`FAIL: the page never received ${missing.join(', ')}`);
  process.exit(1);
}
let checked = 0;
for (const [route, type] of Object.entries(routes)) {
  const name = `http${checked}`;
  source += `// ${route}\nexport const ${name}: ${type} = ` +
            `value(${JSON.stringify(captured.http[route])} as const);\n` +
            `export const ${name}_checked: Checked<${type}> = 'checked';\n`;
  ++checked;
}
for (const [index, message] of captured.ws.entries()) {
  const detail = (detailOf[message.type] || ((d) => d))(message.data);
  const name = `ws${index}_${message.type}`;
  const type = `Listener<Parameters<typeof api.addEventListener<'${message.type}'>>[1]>`;
  const literal = detail === null ? 'null' : `${JSON.stringify(detail)} as const`;
  source += `export const ${name}: ${type} = value(${literal});\n` +
            `export const ${name}_checked: Checked<${type}> = 'checked';\n`;
  ++checked;
}
const file = join(out, 'captured_types.ts');
writeFileSync(file, source);
writeFileSync(join(out, 'tsconfig.json'), JSON.stringify({
  compilerOptions: {
    strict: true, noEmit: true, skipLibCheck: true, target: 'es2022', module: 'es2022',
    moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: [],
    baseUrl: npm,
    paths: { '*': [join(npm, '*'), join(npm, '@types', '*')] },
  },
  files: [file],
}, null, 1));
const tsc = spawnSync(process.execPath, [join(npm, 'typescript', 'bin', 'tsc'), '-p',
                                         join(out, 'tsconfig.json')], { stdio: 'inherit' });
if (tsc.status !== 0) {
  console.error(`FAIL: what serve sent does not match the frontend's types (${file})`);
  process.exit(1);
}
console.log(`ok: ${checked} answers and messages match @comfyorg/comfyui-frontend-types`);
