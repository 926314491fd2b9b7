# syntax=docker/dockerfile:1
# The headless Gatehouse server (no tray, no WebKitGTK): `docker build -t gatehouse .`
# Run with a read-only root filesystem; state lives in the /var/lib/gatehouse volume:
#   docker run --read-only --tmpfs /tmp -v gatehouse:/var/lib/gatehouse -p 8080:8080 \
#     -e GATEHOUSE_PUBLIC_URL=https://gatehouse.example.com -e ANTHROPIC_API_KEY=... \
#     -e GATEHOUSE_CLIENT_KEY=... --stop-timeout 40 gatehouse
# Mount your own config over /etc/gatehouse/gateway.yaml (see README.md, "Install").

# The dashboard the engine embeds at compile time (ui/dist).
FROM node:20-bookworm-slim AS ui
WORKDIR /src/ui
COPY ui/package.json ui/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY ui/ ./
RUN npm run build

# The release binary, headless: --no-default-features leaves out the Tauri tray.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
COPY --from=ui /src/ui/dist ui/dist
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p gatehouse --no-default-features \
 && install -D -s -m 0755 target/release/gatehouse /out/gatehouse \
 && install -d -m 0750 /out/state

# glibc and libgcc only (all the headless binary links: libc, libm, libgcc_s); no shell,
# no package manager; runs as uid 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/gatehouse /usr/local/bin/gatehouse
COPY --from=build --chown=65532:65532 /out/state /var/lib/gatehouse
COPY deploy/container/gateway.yaml /etc/gatehouse/gateway.yaml
USER 65532:65532
ENV TMPDIR=/tmp
VOLUME ["/var/lib/gatehouse"]
EXPOSE 8080
# SIGTERM stops accepting, lets in-flight requests finish (timeouts.shutdown_drain_ms,
# 30 s by default) and flushes usage rows; give `docker stop` more than that.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=6s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/gatehouse", "healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/gatehouse", "--data-dir", "/var/lib/gatehouse"]
CMD ["serve", "--config", "/etc/gatehouse/gateway.yaml"]
