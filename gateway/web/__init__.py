"""The HTTP edge every view uses: the one table of paths and their surfaces (`paths`), the error
type and its renderers per surface (`errors`), request bodies (`body`) and their validation,
the JSON output layer, the middleware, the hot routes' way through Django (`hotpath`), and the
answers for requests no endpoint took (`fallback`).

May import: `gateway.telemetry`, `gateway.state` (and the Django shell: settings, models)."""
