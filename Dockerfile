# toolhost as a container: `toolhost serve --http` in front of agents.
#
#   docker build -t toolhost .
#   docker run --rm -p 8000:8000 --read-only -v toolhost-cache:/var/cache/toolhost toolhost
#
# Stage 1 builds the CLI and the example plugins with the pinned toolchain;
# stage 2 is distroless: glibc and the binary, no shell, no package manager,
# running as an unprivileged user. The root file system can be read-only:
# the only place toolhost writes is its compiled-module and download cache,
# a volume at /var/cache/toolhost.

FROM rust:1.96.0-slim-bookworm AS build
WORKDIR /src
RUN rustup target add wasm32-wasip1 wasm32-wasip2
COPY . .
RUN cargo build --release --locked -p toolhost-cli \
    && cargo xtask build-plugins \
    && mkdir -p /out/plugins \
    && cp target/release/toolhost /out/toolhost \
    && cp target/plugins/*.wasm /out/plugins/

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/toolhost /usr/local/bin/toolhost
COPY --from=build /out/plugins /opt/toolhost/plugins
COPY deploy/toolsets.yaml /etc/toolhost/toolsets.yaml
ENV TOOLHOST_CACHE_DIR=/var/cache/toolhost
VOLUME ["/var/cache/toolhost"]
USER 65532:65532
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/toolhost", "serve", "--http", "0.0.0.0:8000", "--log-format", "json"]
CMD ["--config", "/etc/toolhost/toolsets.yaml"]
