import { SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

// The default image's toolchains, through a start as a user's repository would use them, offline:
// its setup script builds a C extension (a local sdist, installed into a venv with
// `pip install --no-build-isolation`) and a Node package with a native addon and no npm
// dependencies (node-gyp from Debian, against Debian's Node headers).

const PY_EXTENSION = {
  "ext/setup.py": `from setuptools import Extension, setup
setup(name="tern_fast", version="0.1", ext_modules=[Extension("tern_fast", ["tern_fast.c"])])
`,
  "ext/tern_fast.c": `#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
  long a, b;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
  return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b, in C"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tern_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit_tern_fast(void) { return PyModule_Create(&module); }
`,
};

const NODE_ADDON = {
  "addon/package.json": `${JSON.stringify({
    name: "tern-addon",
    version: "0.1.0",
    main: "index.js",
    scripts: { install: "node-gyp rebuild" },
  })}\n`,
  "addon/binding.gyp": `${JSON.stringify({ targets: [{ target_name: "addon", sources: ["addon.c"] }] })}\n`,
  "addon/index.js": `module.exports = require("./build/Release/addon.node");\n`,
  "addon/addon.c": `#include <node_api.h>
static napi_value hello(napi_env env, napi_callback_info info) {
  napi_value s;
  napi_create_string_utf8(env, "native hello", NAPI_AUTO_LENGTH, &s);
  return s;
}
static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "hello", NAPI_AUTO_LENGTH, hello, NULL, &fn);
  napi_set_named_property(env, exports, "hello", fn);
  return exports;
}
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
`,
};

const SETUP = `#!/bin/bash
set -euxo pipefail
python3 -m venv .venv
(cd ext && ../.venv/bin/python setup.py -q sdist)
.venv/bin/pip install --no-index --no-build-isolation ext/dist/tern_fast-0.1.tar.gz
(cd addon && npm install --offline --no-audit --no-fund)
`;

let h: StartHarness;
let worker: ServiceProcess | undefined;

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/native", {
    ...PY_EXTENSION,
    ...NODE_ADDON,
    ".openhands/setup.sh": SETUP,
  });
  worker = await h.startWorker();
}, scaled(120_000));

afterAll(async () => {
  await worker?.stop();
  await h?.close();
});

describe("the default image's toolchains", () => {
  it(
    "a setup script builds a C extension into a venv and a Node native addon, offline, and both run",
    async () => {
      const { userId } = await h.newUser();
      const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/native" });
      const { task } = await h.waitForTask(taskId, scaled(300_000));
      expect(task.detail).toBeNull();
      expect(task.status).toBe("READY");
      const sandbox = (await h.sandboxes()).find((s) => s.labels[SandboxLabel.TaskId] === uuidOf(taskId));
      const r = await h.execIn(
        sandbox!.name,
        `cd /workspace/native && .venv/bin/python -c 'import tern_fast; print(tern_fast.add(40, 2))' &&
node -e 'console.log(require("./addon").hello())'`,
      );
      expect(r).toEqual({ exitCode: 0, output: "42\nnative hello\n" });
    },
    scaled(360_000),
  );
});

describe("a sandbox on an ordinary engine", () => {
  it(
    "has no sudo, and a setup script that needs it fails the start saying why",
    async () => {
      await h.git.createFixtureRepo("acme/needs-root", {
        ".openhands/setup.sh": "#!/bin/bash\nset -e\nsudo apt-get install -y libpq-dev\n",
      });
      const { userId } = await h.newUser();
      const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/needs-root" });
      const { task } = await h.waitForTask(taskId, scaled(120_000));
      expect(task.status).toBe("ERROR");
      expect(task.detail).toMatch(
        /^RUNNING_SETUP_SCRIPT: .*exited with code 1; sudo: this engine does not map root to an unprivileged user; see the README, "Root in sandboxes"/,
      );
      expect(task.detail).toMatch(/no new privileges/);
    },
    scaled(180_000),
  );
});
