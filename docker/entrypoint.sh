#!/bin/sh
# Entry point of the skewlab image (installed as /usr/local/bin/skewlab-entrypoint; tini runs it).
#
#   skewlab-entrypoint skewlab produce ...    run the command, after adding one
#                                             `--workload-param P` per word of $SKEWLAB_WORKLOAD_PARAMS
#   skewlab-entrypoint skewlab engine ...     run the command, after adding one `--param P` per word of
#                                             $SKEWLAB_ALGORITHM_PARAMS
#   skewlab-entrypoint skewlab dashboard ...  run the command; without $SKEWLAB_DASHBOARD_TOKEN, use the
#                                             token in $SKEWLAB_DATA_DIR/dashboard-token (created once,
#                                             mode 600, random) so that the controls work behind a
#                                             published port; the token itself is never printed
#   skewlab-entrypoint health engine RUN      healthcheck: the run RUN is registered in the database
#                                             ($SKEWLAB_DB_URL) by a started engine
#   skewlab-entrypoint health dashboard PORT  healthcheck: the dashboard answers HTTP on 127.0.0.1:PORT
#   skewlab-entrypoint anything else          exec'd unchanged
#
# With SKEWLAB_ENTRYPOINT_DRY_RUN=1 the final command is printed (one argument per line) instead of
# run; tests/end_to_end/test_compose.py uses that to check the commands of docker-compose.yml.
set -eu

dry_run() {
    [ "${SKEWLAB_ENTRYPOINT_DRY_RUN:-0}" = "1" ]
}

run() {
    if dry_run; then
        for arg in "$@"; do
            printf '%s\n' "$arg"
        done
        exit 0
    fi
    exec "$@"
}

health() {
    what="${1:-}"
    case "$what" in
        engine)
            exec python - "${2:-}" <<'EOF'
import sys
from skewlab.storage import connect
name = sys.argv[1]
try:
    runs = connect(create=False).list_runs(limit=50)  # $SKEWLAB_DB_URL
except Exception as exc:  # database down or no tables yet: not healthy
    print(f"engine not ready: {type(exc).__name__}", file=sys.stderr)
    sys.exit(1)
sys.exit(0 if any(r.get("name") == name for r in runs) else 1)
EOF
            ;;
        dashboard)
            exec python - "${2:-8050}" <<'EOF'
import sys
import urllib.error
import urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{int(sys.argv[1])}/", timeout=5).close()
except urllib.error.HTTPError as exc:  # an HTTP answer, even 4xx, means the server is up
    sys.exit(0 if exc.code < 500 else 1)
except OSError:
    sys.exit(1)
EOF
            ;;
        *)
            echo "skewlab-entrypoint: health engine RUN | health dashboard PORT" >&2
            exit 2
            ;;
    esac
}

if [ "${1:-}" = "health" ]; then
    shift
    health "$@"
fi

if [ "${1:-}" = "skewlab" ]; then
    set -f  # the parameter lists below are split on blanks but never glob-expanded
    case "${2:-}" in
        produce)
            # word splitting is wanted here: "z=1.2 keys=100000" -> two parameters
            for p in ${SKEWLAB_WORKLOAD_PARAMS:-}; do
                set -- "$@" --workload-param "$p"
            done
            ;;
        engine)
            for p in ${SKEWLAB_ALGORITHM_PARAMS:-}; do
                set -- "$@" --param "$p"
            done
            ;;
        dashboard)
            if [ -z "${SKEWLAB_DASHBOARD_TOKEN:-}" ]; then
                token_file="${SKEWLAB_DATA_DIR:-/data}/dashboard-token"
                if [ ! -s "$token_file" ]; then
                    (umask 077 && python -c 'import secrets; print(secrets.token_urlsafe(24))' > "$token_file")
                fi
                SKEWLAB_DASHBOARD_TOKEN=$(cat "$token_file")
                export SKEWLAB_DASHBOARD_TOKEN
                echo "skewlab-entrypoint: operator token in $token_file" \
                     "(docker compose exec dashboard cat $token_file)" >&2
            fi
            ;;
    esac
fi

run "$@"
