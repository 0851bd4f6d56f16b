# syntax=docker/dockerfile:1
# Build: dependencies from the lock file, then the TypeScript build, then only production
# dependencies are kept for the runtime stage. The stage runs on the builder's own platform
# ($BUILDPLATFORM): a multi-platform build then compiles once, natively, instead of under
# emulation per target. What it makes is JavaScript, the same for every target; the one
# target-dependent part, npm's choice of platform-specific optional packages, is made for the
# target by the prune (npm names amd64 x64). test/packaging/dockerfile.test.ts checks that no production
# dependency carries native code or an install script, which would have to run on the target.
# Both bases are pinned by digest (the multi-platform index): a rebuild of a tag is the same
# image, and a new base is a change of this file, reviewed (Dependabot's docker ecosystem proposes
# it, .github/dependabot.yml). Node 24.18.0 here; distroless Node 24 on Debian 12.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --os="$TARGETOS" --cpu="$(echo "$TARGETARCH" | sed s/amd64/x64/)" --no-audit --no-fund

# Runtime: distroless Node 24, no shell, no package manager, non-root. The process is PID 1 and
# handles SIGTERM itself (readiness off, drain, exit). This stage only copies files, so building
# it for another platform needs no emulation either.
FROM gcr.io/distroless/nodejs24-debian12:nonroot@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a
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
