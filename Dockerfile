# syntax=docker/dockerfile:1
# The `courier` binary, statically linked against musl, in a distroless image that runs it as
# non-root (65532). Build from the repository root:
#   docker build -t courier:dev .
# The same image serves the controller (`courier run`, what charts/courier starts) and the CLI.

FROM docker.io/library/rust:1.95-bookworm AS build
# musl-tools: a C compiler for ring's assembly and C parts under the musl target.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# No debug info and stripped symbols: the image carries only what runs.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p courier \
 && cp target/x86_64-unknown-linux-musl/release/courier /courier

# distroless/static: no shell, no package manager; CA certificates and /etc/passwd with `nonroot`.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /courier /usr/local/bin/courier
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/courier"]
CMD ["--help"]
