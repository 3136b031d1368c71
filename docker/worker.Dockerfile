# tern worker (apps/worker). Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t tern-worker .
# (docker/compose.yaml does this.) The worker drives sandbox containers through
# the Docker API: mount the engine's socket (or set DOCKER_HOST).

FROM node:20-slim AS base
ENV COREPACK_HOME=/usr/local/share/corepack \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0 \
    PNPM_HOME=/pnpm \
    npm_config_store_dir=/pnpm/store
# pnpm at the version pinned by package.json's packageManager, fetched at build time.
RUN corepack enable && corepack prepare pnpm@10.34.8 --activate && chmod -R a+rX "$COREPACK_HOME"
WORKDIR /app

FROM base AS build
# Dependencies first, from the lockfile alone: this layer survives source changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./
RUN pnpm fetch
COPY . .
# Drop any node_modules that came in with the build context (no .dockerignore needed).
RUN find . -name node_modules -type d -prune -exec rm -rf {} + \
    && pnpm install --frozen-lockfile --offline

FROM base AS runtime
ENV NODE_ENV=production
COPY --from=build /app /app
# Root, because /var/run/docker.sock is root:docker with a host-specific gid;
# access to that socket is root-equivalent anyway. With a TCP/TLS DOCKER_HOST
# you can run it as `node` instead (docker run --user node).
CMD ["pnpm", "--filter", "@tern/worker", "start"]
