// Tells Monaco (GraphiQL's editor) where its web workers are. They are built
// as separate files next to the main bundle; the build passes their
// content-hashed names in __SWITCHYARD_WORKERS__, and they are resolved
// against this module's own URL so they load from the server that served
// the page, never from a CDN.

/* global __SWITCHYARD_WORKERS__ */
const files = __SWITCHYARD_WORKERS__;

globalThis.MonacoEnvironment = {
  getWorker(_workerId, label) {
    const file = files[label] || files.editor;
    return new Worker(new URL(file, import.meta.url), { name: label });
  },
};
