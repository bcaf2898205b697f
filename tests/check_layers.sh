#!/bin/sh
# The endpoint is a one-way stack (layer/ep/ep.h): ep/ -> proto/ -> conn/ -> core/. A file
# may include the headers of its own layer and of the layers below it, never above; util/
# includes nothing of layer/, and the objects outside the stack (CQ, counter, EQ, MR, AV)
# include none of it (the domain opens endpoints, so it sees ep/ and core/). Prints every
# include that breaks the rule; fails if there is one.
top=${srcdir:-$(dirname "$0")/..}
cd "$top" || exit 99
status=0

# check DIR_OR_FILES... -- FORBIDDEN_PREFIX...
check() {
	files=
	while [ "$1" != "--" ]; do files="$files $1"; shift; done
	shift
	for prefix in "$@"; do
		hits=$(grep -n "#include \"$prefix" $files 2>/dev/null)
		if [ -n "$hits" ]; then
			echo "FAIL: includes above their layer ($prefix):"
			echo "$hits"
			status=1
		fi
	done
}

check util/*.[ch] -- layer/
check layer/core/*.[ch] -- layer/conn/ layer/proto/ layer/rma/ layer/ep/ layer/av/
check layer/conn/*.[ch] -- layer/proto/ layer/rma/ layer/ep/
check layer/proto/*.[ch] layer/rma/*.[ch] -- layer/ep/
for f in layer/*.[ch] layer/av/*.[ch]; do
	case $f in layer/domain.c) continue ;; esac
	check "$f" -- layer/ep/ layer/proto/ layer/rma/ layer/conn/ layer/core/
done
[ $status -eq 0 ] && echo "PASS: every file includes its own layer and those below"
exit $status
