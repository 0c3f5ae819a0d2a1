echo PINFOLD-TEST-STARTED
t() { local d=$1 err; shift; if err=$(bash -c "$1" 2>&1 </dev/null); then echo "ESCAPED: $d"; else echo "refused: $d: $err"; fi; }
