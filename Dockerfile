# syntax=docker/dockerfile:1
# rdmalb container image: a multi-stage build producing a slim runtime image
# with the `rdmalb` binary (proxy, sidecar, check) and the example configs.
#
#   docker build -t rdmalb .
#   docker run --rm -p 8080:8080 -p 9100:9100 \
#       -v $PWD/my-rdmalb.toml:/etc/rdmalb/rdmalb.toml:ro rdmalb
#   docker run --rm rdmalb check -c /etc/rdmalb/rdmalb.toml
#
# The verbs transport needs the host's RDMA device in the container
# (--device=/dev/infiniband/uverbs0 --device=/dev/infiniband/rdma_cm, and
# --ulimit memlock=-1 to register memory); shm needs /dev/shm shared with the
# sidecar's container (--ipc=host or a shared volume). See docs/demo.md.

# ---------------------------------------------------------------- build
FROM rust:1-bookworm AS build
# sideway (the verbs transport) builds its rdma-core bindings with cmake and
# bindgen, which needs libclang.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake clang libclang-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the target dir between builds; the
# binary is copied out in the same step because the target dir is a mount.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin rdmalb \
    && install -D -m 0755 target/release/rdmalb /out/rdmalb

# ---------------------------------------------------------------- runtime
FROM debian:bookworm-slim
# libibverbs1 + ibverbs-providers (the NIC drivers' user-space halves) and
# librdmacm1 are loaded at run time by the verbs transport; without an RDMA
# device rdmalb still runs the shm and tcp transports.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates libibverbs1 ibverbs-providers librdmacm1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin rdmalb \
    && mkdir -p /etc/rdmalb /var/log/rdmalb \
    && chown rdmalb:rdmalb /var/log/rdmalb
COPY --from=build /out/rdmalb /usr/local/bin/rdmalb
COPY conf/ /etc/rdmalb/
USER rdmalb
# Unprivileged ports: the user cannot bind below 1024 (map 80 → 8080 with -p).
# 8080 HTTP, 8443 HTTPS, 9100 admin (/metrics, /status).
EXPOSE 8080 8443 9100
STOPSIGNAL SIGTERM
ENTRYPOINT ["rdmalb"]
CMD ["proxy", "-c", "/etc/rdmalb/rdmalb.toml"]
