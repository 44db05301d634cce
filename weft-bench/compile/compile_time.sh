#!/usr/bin/env bash
# Compile time of the same small service on weft and on tonic (issue:
# "compile time measured against tonic"): a server and a client of one
# generated unary service over loopback, encrypted (weft's standard stack;
# tonic with TLS on aws-lc), its code generated in build.rs without
# protoc. For each profile (debug, release) and each project in turn: a
# clean build (dependencies downloaded beforehand, not timed), then a
# rebuild after a one-line change to main.rs; then the binary is run.
#
#   bash weft-bench/compile/compile_time.sh            # one round
#   ROUNDS=3 bash weft-bench/compile/compile_time.sh   # interleaved rounds
#
# weft's Cargo.toml is README's dependency lines, pointed at this checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${WORK:-$repo/target/compile-time}
rounds=${ROUNDS:-1}
mkdir -p "$work"

setup() { # project
    rm -rf "${work:?}/$1"
    cp -r "$here/$1-service" "$work/$1"
    cp -r "$here/proto" "$work/$1/proto"
}
setup weft
{
    printf '[package]\nname = "weft-service"\nversion = "0.1.0"\nedition = "2021"\npublish = false\n\n[workspace]\n\n'
    sed -n '/^```toml$/,/^```$/p' "$repo/README.md" | sed '1d;$d'
    printf '\n[patch.crates-io]\nweft = { path = "%s" }\nweft-build = { path = "%s/weft-build" }\n' "$repo" "$repo"
} > "$work/weft/Cargo.toml"
setup tonic
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -addext basicConstraints=critical,CA:FALSE -keyout "$work/tonic/key.pem" -out "$work/tonic/cert.pem" 2>/dev/null

seconds() { # project, cargo args...
    local project=$1
    shift
    local start end
    start=$(date +%s.%N)
    (cd "$work/$project" && CARGO_TARGET_DIR="$work/$project/target" cargo build -q "$@")
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}

for project in weft tonic; do
    (cd "$work/$project" && cargo fetch -q)
done
printf '| round | profile | project | clean build (s) | rebuild after a one-line change (s) | crates |\n|---|---|---|---|---|---|\n'
for round in $(seq "$rounds"); do
    for profile in dev release; do
        for project in weft tonic; do
            args=()
            [ "$profile" = release ] && args=(--release)
            rm -rf "$work/$project/target"
            clean=$(seconds "$project" "${args[@]}")
            # One line changed: the greeting the handler answers.
            sed -i "s/format!(\"hello, /format!(\"hello,  /" "$work/$project/src/main.rs"
            sed -i "s/\"hello, {}\"/\"hello,  {}\"/; s/\"hello, weft\"/\"hello,  weft\"/; s/\"hello, tonic\"/\"hello,  tonic\"/" "$work/$project/src/main.rs"
            rebuild=$(seconds "$project" "${args[@]}")
            crates=$(cd "$work/$project" && cargo tree -q --prefix none -e normal,build | sed 's/ (\*)//' | sort -u | wc -l)
            dir=debug
            [ "$profile" = release ] && dir=release
            (cd "$work/$project" && "./target/$dir/$project-service" >/dev/null)
            printf '| %s | %s | %s | %.1f | %.1f | %s |\n' "$round" "$profile" "$project" "$clean" "$rebuild" "$crates"
            # Back to the original line for the next round.
            cp "$here/$project-service/src/main.rs" "$work/$project/src/main.rs"
        done
    done
done
