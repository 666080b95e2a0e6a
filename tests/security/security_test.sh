#!/usr/bin/env bash
# Every refusal of TLS and the dashboard's token, with real processes on
# 127.0.0.1 (docs/security.md), one scenario per CTest test:
#   security_test.sh MICRODDP SCENARIO
# OpenSSL's own command line (`openssl verify`, `openssl s_client`) and curl
# are the independent clients. Every wait is bounded; every process started
# here is killed on exit.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/../support/scenario.sh"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT

JOB=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 32 --no-eval --log-every 1000000)
TOKEN=job-token-1234
DASH_TOKEN=dashboard-token-0123456789

# bg NAME CMD...: CMD in the background, output in $WORK/NAME.out, pid in $LAST.
bg() {
  local name="$1"; shift
  "$@" >"$WORK/$name.out" 2>&1 &
  LAST=$!
  PIDS+=("$LAST")
}
# within SECONDS CMD...: polls CMD every 0.1 s; false when it never held.
within() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do (( $(date +%s) >= deadline )) && return 1; sleep 0.1; done
}
# finish PID SECONDS: waits for a background child; its exit code in RC (124: still running).
finish() {
  within "$2" eval "! kill -0 $1 2>/dev/null" || { RC=124; return; }
  wait "$1"; RC=$?
}
# A worker that must be refused: exits non-zero within 30 s with one error line matching $1.
refused_worker() {
  local why="$1" name="$2"; shift 2
  bg "$name" "$BIN" worker --coordinator "$ADDR" --token "$TOKEN" --connect-timeout-s 60 "$@"
  finish "$LAST" 30
  [[ $RC -ne 0 && $RC -ne 124 ]] || { cat "$WORK/$name.out"; fail "$name exited $RC, want a refusal"; }
  [[ $(grep -c "microddp: error:" "$WORK/$name.out") -eq 1 ]] || { cat "$WORK/$name.out"; fail "$name: want one error line"; }
  expect_in "microddp: error: .*$why" "$WORK/$name.out"
}
# coordinator NAME WORLD [flags...]: in the background; its address in ADDR.
coordinator() {
  local name="$1" n="$2"; shift 2
  rm -f "$WORK/$name.addr"
  bg "$name" "$BIN" coordinator --world-size "$n" --port 0 --address-file "$WORK/$name.addr" "$@"
  within 30 test -s "$WORK/$name.addr" || { cat "$WORK/$name.out"; fail "$name did not start"; }
  ADDR="$(cat "$WORK/$name.addr")"
}
certs() { "$BIN" certs "$WORK/$1" --hosts "$2" >"$WORK/certs.out" 2>&1 || { cat "$WORK/certs.out"; fail "certs $1"; }; }

case "$SCENARIO" in
  certs)
    # A CA and per-host certificates that OpenSSL's own verifier accepts,
    # naming each host, every file 0600; a second call adds a host under the
    # same CA; a bad host name is one error line.
    certs lab 127.0.0.1,node-1.lab
    for f in ca.pem ca.key 127.0.0.1.pem 127.0.0.1.key node-1.lab.pem node-1.lab.key; do
      [[ $(stat -c %a "$WORK/lab/$f") == 600 ]] || fail "$f has mode $(stat -c %a "$WORK/lab/$f"), want 600"
    done
    openssl verify -CAfile "$WORK/lab/ca.pem" "$WORK/lab/127.0.0.1.pem" "$WORK/lab/node-1.lab.pem" >"$WORK/verify.out" 2>&1 \
      || { cat "$WORK/verify.out"; fail "openssl verify refused the certificates"; }
    openssl x509 -in "$WORK/lab/127.0.0.1.pem" -noout -ext subjectAltName >"$WORK/san.out" 2>&1
    expect_in "IP Address:127.0.0.1" "$WORK/san.out"
    openssl x509 -in "$WORK/lab/node-1.lab.pem" -noout -ext subjectAltName,extendedKeyUsage >"$WORK/san.out" 2>&1
    expect_in "DNS:node-1.lab" "$WORK/san.out"
    expect_in "TLS Web Client Authentication" "$WORK/san.out"
    CA_BEFORE=$(sha256sum <"$WORK/lab/ca.pem")
    certs lab node-2
    [[ $(sha256sum <"$WORK/lab/ca.pem") == "$CA_BEFORE" ]] || fail "a second call replaced the CA"
    openssl verify -CAfile "$WORK/lab/ca.pem" "$WORK/lab/node-2.pem" >/dev/null 2>&1 || fail "node-2 not signed by the lab CA"
    # NAME+ALT+...: one certificate naming each (the compose lab's coordinator).
    certs lab coordinator+127.0.0.1+localhost
    openssl x509 -in "$WORK/lab/coordinator.pem" -noout -ext subjectAltName >"$WORK/san.out" 2>&1
    expect_in "DNS:coordinator, IP Address:127.0.0.1, DNS:localhost" "$WORK/san.out"
    openssl verify -CAfile "$WORK/lab/ca.pem" "$WORK/lab/coordinator.pem" >/dev/null 2>&1 || fail "coordinator not signed by the lab CA"
    "$BIN" certs "$WORK/lab" --hosts 'coordinator++x' >"$WORK/out" 2>&1 && fail "an empty name between '+' was accepted"
    expect_in "microddp: error: --hosts: '' is not a host name" "$WORK/out"
    "$BIN" certs "$WORK/lab" --hosts 'a b' >"$WORK/out" 2>&1 && fail "a host name with a space was accepted"
    expect_in "microddp: error: --hosts: 'a b' is not a host name" "$WORK/out"
    ;;

  bad_flags)
    # Every wrong TLS or dashboard-token flag: one error line, exit 1, before anything listens.
    certs lab 127.0.0.1
    certs other 127.0.0.1
    L="$WORK/lab"
    check() {
      local want="$1"; shift
      timeout 30 "$BIN" "$@" >"$WORK/out" 2>&1; local rc=$?
      [[ $rc -eq 1 ]] || { cat "$WORK/out"; fail "$* exited $rc, want 1"; }
      expect_in "microddp: error: .*$want" "$WORK/out"
    }
    C=(coordinator --world-size 1 --port 0 --http-port 0)
    check "give --tls-cert and --tls-key together" "${C[@]}" --tls-cert "$L/127.0.0.1.pem"
    check "--tls-client-auth needs --tls-ca" "${C[@]}" --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key" --tls-client-auth
    check "is not the key of --tls-cert" "${C[@]}" --tls-cert "$L/127.0.0.1.pem" --tls-key "$WORK/other/127.0.0.1.key"
    check "cannot read --tls-cert" "${C[@]}" --tls-cert "$L/nope.pem" --tls-key "$L/127.0.0.1.key"
    check "holds no PEM certificate" "${C[@]}" --tls-cert "$L/127.0.0.1.key" --tls-key "$L/127.0.0.1.key"
    check "holds no unencrypted PEM private key" "${C[@]}" --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.pem"
    check "TLS needs this side's certificate" "${C[@]}" --tls-ca "$L/ca.pem"
    check "must have at least 16 characters" "${C[@]}" --http-token short
    check "may hold only letters, digits" "${C[@]}" --http-token 'has spaces and; semicolons!'
    echo -n "" >"$WORK/empty"
    check "--http-token-file .* is empty" "${C[@]}" --http-token-file "$WORK/empty"
    check "TLS to the coordinator needs --tls-ca" worker --coordinator 127.0.0.1:1 --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key"
    ;;

  run_tls)
    # `run --tls`: a throw-away CA, mutual TLS on the control plane, HTTPS for
    # the dashboard; the job trains to the end.
    timeout 120 "$BIN" run --nproc 2 --tls "${JOB[@]}" --steps 30 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 \
      || { cat "$WORK/run.out"; fail "run --tls failed"; }
    expect_in "all 2 ranks finished" "$WORK/run.out"
    expect_in "dashboard at https://127.0.0.1:" "$WORK/run.out"
    expect_in "listening on 127.0.0.1:[0-9]* (2 workers expected, mutual TLS)" "$WORK/run/coordinator.log"
    [[ $(grep -c '"kind":"step"' "$WORK/run/metrics.jsonl") -eq 60 ]] || fail "metrics.jsonl lacks records"
    ;;

  strangers)
    # A coordinator under mutual TLS. Refused, each with its own one line and
    # without waiting for the connect timeout: a plaintext worker, one that
    # trusts another CA, one without a client certificate, one whose
    # certificate another CA signed. A TLS worker to a plaintext coordinator
    # is refused too. The job, meanwhile, forms and finishes untouched.
    certs lab 127.0.0.1
    certs other 127.0.0.1
    L="$WORK/lab" O="$WORK/other"
    coordinator plain 1 --token "$TOKEN" --http-port -1 --rendezvous-timeout-s 120 "${JOB[@]}" --steps 10
    refused_worker "it does not speak TLS" tls_to_plain --tls-ca "$L/ca.pem"
    coordinator coord 2 --token "$TOKEN" --http-port -1 "${JOB[@]}" --steps 3000 --run-dir "$WORK/run" \
      --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key" --tls-ca "$L/ca.pem" --tls-client-auth
    GOOD=(--tls-ca "$L/ca.pem" --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key")
    bg w0 "$BIN" worker --coordinator "$ADDR" --token "$TOKEN" "${GOOD[@]}"; W0=$LAST
    refused_worker "it speaks TLS, so give --tls-ca" plaintext
    refused_worker "the TLS handshake failed (certificate verify failed)" wrong_ca --tls-ca "$O/ca.pem"
    refused_worker "refused the TLS connection: under --tls-client-auth" no_client_cert --tls-ca "$L/ca.pem"
    refused_worker "refused the TLS connection" foreign_client_cert --tls-ca "$L/ca.pem" \
      --tls-cert "$O/127.0.0.1.pem" --tls-key "$O/127.0.0.1.key"
    # Garbage on the port: the handshake fails, the coordinator carries on.
    printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | timeout 5 bash -c "cat >/dev/tcp/${ADDR%:*}/${ADDR##*:}" 2>/dev/null
    bg w1 "$BIN" worker --coordinator "$ADDR" --token "$TOKEN" "${GOOD[@]}"; W1=$LAST
    finish "$W0" 120; [[ $RC -eq 0 ]] || { cat "$WORK/w0.out"; fail "worker 0 exited $RC"; }
    finish "$W1" 60; [[ $RC -eq 0 ]] || { cat "$WORK/w1.out"; fail "worker 1 exited $RC"; }
    [[ $(grep -c '"kind":"step"' "$WORK/run/metrics.jsonl") -eq 6000 ]] || fail "metrics incomplete"
    expect_in "Handshake failed" "$WORK/coord.out"   # gRPC's own log line of each refusal
    ;;

  warnings)
    # No job token off loopback: refused unless asked for explicitly
    # (--insecure-no-token). Plaintext or no token: one clear warning each
    # (no token on loopback too: every local user can join); none with TLS
    # and a token.
    certs lab 127.0.0.1
    L="$WORK/lab"
    timeout 20 "$BIN" coordinator --world-size 1 --port 0 --host 0.0.0.0 >"$WORK/refused.out" 2>&1
    [[ $? -eq 1 ]] || { cat "$WORK/refused.out"; fail "no token on 0.0.0.0 was not refused"; }
    expect_in "microddp: error: --host 0.0.0.0 with no --token: .*--insecure-no-token" "$WORK/refused.out"
    coordinator open 1 --host 0.0.0.0 --http-host 0.0.0.0 --insecure-no-token --rendezvous-timeout-s 60
    expect_in "warning: the control plane on .* has no TLS: the job token, config and metrics travel in the clear" "$WORK/open.out"
    expect_in "warning: the dashboard on http://.* has no --http-token" "$WORK/open.out"
    expect_in "warning: no --token: anyone who can reach .* can join this job$" "$WORK/open.out"
    [[ $(grep -c "has no TLS" "$WORK/open.out") -eq 1 ]] || fail "want the TLS warning once"
    coordinator safe 1 --host 0.0.0.0 --http-host 0.0.0.0 --token "$TOKEN" --http-token "$DASH_TOKEN" --rendezvous-timeout-s 60 \
      --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key"
    coordinator local 1 --rendezvous-timeout-s 60
    sleep 1
    grep -q "warning" "$WORK/safe.out" && { cat "$WORK/safe.out"; fail "safe: unexpected warning"; }
    [[ $(grep -c "warning" "$WORK/local.out") -eq 1 ]] || { cat "$WORK/local.out"; fail "local: want one warning"; }
    expect_in "warning: no --token: .* (every user of this machine)" "$WORK/local.out"
    true
    ;;

  dashboard)
    # The dashboard with a token over HTTPS with the control plane's own
    # certificate: nothing without the token (401, no job data), with a wrong
    # one, or over plain HTTP; the bearer header and the login cookie work;
    # the WebSocket upgrade needs the token and the page's own origin.
    certs lab 127.0.0.1
    L="$WORK/lab"
    coordinator coord 1 --rendezvous-timeout-s 120 --http-port 0 --http-token "$DASH_TOKEN" \
      --http-url-file "$WORK/url" --tls-cert "$L/127.0.0.1.pem" --tls-key "$L/127.0.0.1.key"
    LOGIN="$(cat "$WORK/url")"
    [[ "$LOGIN" == "https://127.0.0.1:"*"/login?token=$DASH_TOKEN" ]] || fail "login URL '$LOGIN'"
    [[ $(stat -c %a "$WORK/url") == 600 ]] || fail "the URL file (it holds the token) is not 0600"
    BASE="${LOGIN%login*}"
    PORT="${BASE##*:}"; PORT="${PORT%/}"
    # The dashboard serves exactly --tls-cert.
    SERVED=$(openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256)
    [[ -n "$SERVED" && "$SERVED" == "$(openssl x509 -in "$L/127.0.0.1.pem" -noout -fingerprint -sha256)" ]] \
      || fail "the dashboard serves another certificate: '$SERVED'"
    CURL=(curl -s -m 10 --cacert "$L/ca.pem")
    code() { "${CURL[@]}" -o "$WORK/body" -w '%{http_code}' "$@"; }
    for path in "" api/job api/ranks api/metrics metrics api/trace app.js; do
      [[ $(code "$BASE$path") == 401 ]] || fail "/$path without the token: $(cat "$WORK/body")"
      grep -q '"job_id"\|microddp_\|local' "$WORK/body" && fail "/$path leaked job data without the token"
      [[ $(code -H "Authorization: Bearer wrong-$DASH_TOKEN" "$BASE$path") == 401 ]] || fail "/$path with a wrong token"
    done
    [[ $(code "${BASE}login?token=wrong-$DASH_TOKEN") == 401 ]] || fail "login with a wrong token"
    [[ $(code -H "Authorization: Bearer $DASH_TOKEN" "${BASE}api/job") == 200 ]] || fail "bearer refused"
    expect_in '"job_id":"local"' "$WORK/body"
    [[ $(code -H "Authorization: Bearer $DASH_TOKEN" "${BASE}metrics") == 200 ]] || fail "bearer refused on /metrics"
    expect_in "microddp_" "$WORK/body"
    [[ $(code -c "$WORK/jar" "$LOGIN") == 303 ]] || fail "login did not redirect"
    grep -q "microddp_$PORT" "$WORK/jar" || fail "login set no cookie"
    [[ $(code -b "$WORK/jar" "$BASE") == 200 ]] || fail "the page refused the login cookie"
    expect_in "<html" "$WORK/body"
    "${CURL[@]}" -D "$WORK/headers" -o /dev/null "$LOGIN"
    expect_in "Set-Cookie: microddp_$PORT=.*HttpOnly; SameSite=Strict; Secure" "$WORK/headers"
    # The stream: refused without the token and from another origin.
    WS=(-H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==")
    [[ $(code "${WS[@]}" "${BASE}api/stream") == 401 ]] || fail "stream upgrade without the token"
    [[ $(code -b "$WORK/jar" "${WS[@]}" -H "Origin: https://evil.example" "${BASE}api/stream") == 403 ]] \
      || fail "stream upgrade from another origin"
    # Plain HTTP to the HTTPS port: nothing answers.
    rm -f "$WORK/body"
    curl -s -m 5 -o "$WORK/body" "http://127.0.0.1:$PORT/api/job"
    [[ ! -s "$WORK/body" ]] || fail "plain HTTP got an answer"
    expect_in "refused a wrong token from 127.0.0.1" "$WORK/coord.out"
    ;;

  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
