# tern API (apps/api). Build from the repository root:
#   docker build -f docker/api.Dockerfile -t tern-api .
# (docker/compose.yaml does this.)

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
ENV NODE_ENV=production \
    PORT=3000
COPY --from=build --chown=node:node /app /app
USER node
EXPOSE 3000
CMD ["pnpm", "--filter", "@tern/api", "start"]
