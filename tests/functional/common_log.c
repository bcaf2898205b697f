/*
 * The provider's log as the tests read it (common.h): its warnings (or what a level asks for)
 * kept in a file, then counted.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *lt_log_file;
static int lt_saved_stderr = -1;
static char lt_log_tag[16] = "<warn>";   /* the lines counted: the captured level's */

void lt_log_capture(void)
{
	lt_log_capture_at("warn");
}

void lt_log_capture_at(const char *level)
{
	snprintf(lt_log_tag, sizeof(lt_log_tag), "<%s>", level);
	setenv("FI_LOG_LEVEL", level, 1);
	/* below warnings, the other providers' lines are noise (and come until exit) */
	if (strcmp(level, "warn"))
		setenv("FI_LOG_PROV", "ofi_layer", 0);
	lt_log_file = tmpfile();
	lt_saved_stderr = dup(2);
	if (lt_log_file && lt_saved_stderr >= 0)
		dup2(fileno(lt_log_file), 2);
}

int lt_log_count_each(const char *const *what, size_t what_cnt, int *counts)
{
	char line[1024];
	size_t i;

	if (!lt_log_file || lt_saved_stderr < 0)
		return -1;
	fflush(stderr);
	dup2(lt_saved_stderr, 2);
	rewind(lt_log_file);
	memset(counts, 0, what_cnt * sizeof(*counts));
	while (fgets(line, sizeof(line), lt_log_file)) {
		if (!strstr(line, "ofi_layer") || !strstr(line, lt_log_tag))
			continue;
		for (i = 0; i < what_cnt; i++)
			counts[i] += strstr(line, what[i]) != NULL;
	}
	fclose(lt_log_file);
	lt_log_file = NULL;
	return 0;
}

int lt_log_count(const char *const *what, size_t what_cnt)
{
	int counts[16], cnt = 0;
	size_t i;

	if (what_cnt > 16 || lt_log_count_each(what, what_cnt, counts))
		return -1;
	for (i = 0; i < what_cnt; i++)
		cnt += counts[i];
	return cnt;
}
