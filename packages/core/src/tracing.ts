import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";

/**
 * OpenTelemetry tracing, on when OTEL_EXPORTER_OTLP_ENDPOINT is set (or a test hands an exporter):
 * one trace per start, from the API's request through the queue hop (the W3C trace context rides
 * in the job's data) to each stage of the worker and the sandbox engine's calls within it. Off,
 * every span below is OpenTelemetry's no-op and the SDK is never loaded.
 */
export const tracer = () => trace.getTracer("tern");

export interface TracingHandle {
  shutdown: () => Promise<void>;
}

/** Providers started and not shut down: while none is, a span is OpenTelemetry's no-op. */
let providersOn = 0;

/**
 * Whether spans are recorded (startTracing made a provider). Off, a hot path may skip building a
 * span's name and attributes at all: the no-op span would drop them.
 */
export const tracingOn = (): boolean => providersOn > 0;

export const startTracing = async (
  serviceName: string,
  opts: { endpoint?: string | undefined; exporter?: SpanExporter },
): Promise<TracingHandle | null> => {
  if (!opts.exporter && !opts.endpoint) return null;
  const { NodeTracerProvider } = await import("@opentelemetry/sdk-trace-node");
  const { BatchSpanProcessor, SimpleSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
  const { resourceFromAttributes } = await import("@opentelemetry/resources");
  const processor = opts.exporter
    ? new SimpleSpanProcessor(opts.exporter)
    : new BatchSpanProcessor(
        // The exporter reads the rest of the standard OTEL_EXPORTER_OTLP_* settings (headers...) itself.
        new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter({
          url: `${opts.endpoint?.replace(/\/$/, "")}/v1/traces`,
        }),
      );
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [processor],
  });
  // Global provider, AsyncLocalStorage context and the W3C propagator.
  provider.register();
  providersOn++;
  let stopped = false;
  return {
    shutdown: () => {
      if (!stopped) providersOn--;
      stopped = true;
      return provider.shutdown();
    },
  };
};

/** Runs `fn` in a new span (a child of `parent`, else of the active span); ends it, recording a throw. */
export const withSpan = <T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  opts: { parent?: Context; kind?: SpanKind } = {},
): Promise<T> =>
  tracer().startActiveSpan(
    name,
    { attributes, kind: opts.kind ?? SpanKind.INTERNAL },
    opts.parent ?? context.active(),
    async (span) => {
      try {
        return await fn(span);
      } catch (err) {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
        throw err;
      } finally {
        span.end();
      }
    },
  );

/** The active trace context as W3C headers (traceparent...), to carry across a queue. Empty when off. */
export const injectTraceContext = (): Record<string, string> => {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
};

/** The context a carrier of `injectTraceContext` names (the root context for none). */
export const extractTraceContext = (carrier: unknown): Context =>
  carrier && typeof carrier === "object" ? propagation.extract(ROOT_CONTEXT, carrier) : ROOT_CONTEXT;

export { SpanKind };
