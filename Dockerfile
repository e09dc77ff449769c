# syntax=docker/dockerfile:1
# The `courier` binary, statically linked against musl, in a distroless image that runs it as
# non-root (65532). Build from the repository root:
#   docker build --build-arg COURIER_COMMIT="$(git rev-parse --short=12 HEAD)" -t courier:dev .
# The same image is the controller (`courier run`, what charts/courier starts) and the CLI.
# Builds for the architecture of the build host (amd64 or arm64).

FROM docker.io/library/rust:1.95-bookworm AS build
# musl-tools: the C compiler ring needs for its C and assembly parts under the musl target. Its
# version follows the pinned base image's Debian release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
COPY . .
# The commit courier_build_info reports. The build context has no .git (.dockerignore), so pass it:
#   docker build --build-arg COURIER_COMMIT="$(git rev-parse --short=12 HEAD)" -t courier:dev .
# Without it the metric says commit="unknown". (A build argument is in the environment of RUN.)
ARG COURIER_COMMIT=""
# No debug info and stripped symbols: the image carries only what runs.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
# The registry and target caches survive between builds; the binary is copied out of the cache
# in the same step. `--no-default-features`: no `sandbox` feature, so the image carries no kubesim
# (`courier sandbox`/`demo`/`bench` say so and exit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(uname -m)-unknown-linux-musl" \
 && cargo build --release --locked --target "$target" -p courier --no-default-features \
 && cp "target/$target/release/courier" /courier

# distroless/static: no shell, no package manager; CA certificates and a `nonroot` user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /courier /usr/local/bin/courier
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/courier"]
CMD ["--help"]
