/*
 * The provider's log as the tests read it (common.h): its warnings kept in a file, then
 * counted.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *lt_log_file;
static int lt_saved_stderr = -1;

void lt_log_capture(void)
{
	setenv("FI_LOG_LEVEL", "warn", 1);
	lt_log_file = tmpfile();
	lt_saved_stderr = dup(2);
	if (lt_log_file && lt_saved_stderr >= 0)
		dup2(fileno(lt_log_file), 2);
}

int lt_log_count(const char *const *what, size_t what_cnt)
{
	char line[1024];
	int cnt = 0;
	size_t i;

	if (!lt_log_file || lt_saved_stderr < 0)
		return -1;
	fflush(stderr);
	dup2(lt_saved_stderr, 2);
	rewind(lt_log_file);
	while (fgets(line, sizeof(line), lt_log_file)) {
		if (!strstr(line, "ofi_layer") || !strstr(line, "<warn>"))
			continue;
		for (i = 0; i < what_cnt; i++)
			cnt += strstr(line, what[i]) != NULL;
	}
	fclose(lt_log_file);
	lt_log_file = NULL;
	return cnt;
}
