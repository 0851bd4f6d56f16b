# syntax=docker/dockerfile:1
# Build: dependencies from the lock file, then the TypeScript build, then only production
# dependencies are kept for the runtime stage.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# Runtime: distroless Node 24, no shell, no package manager, non-root. The process is PID 1 and
# handles SIGTERM itself (readiness off, drain, exit).
FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER 65532:65532
# Webhooks (HTTPS), metrics (HTTPS behind Kubernetes authentication), probes (plain HTTP).
EXPOSE 9443 8443 8081
# The V8 flags: see kit/node-flags.ts (RSS about 130 instead of 190-240 MB at 5,000 real-size nodes).
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=8", "--heap-growing-percent=30", "--initial-old-space-size=16", "dist/cli.js"]
CMD ["serve"]
