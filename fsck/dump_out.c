/*
 * dump_out.c - zlfs-dump's report writer: one set of calls makes either a JSON document or
 * indented "key: value" text, so the two forms never disagree about what is shown.
 * May call: libc.
 */
#include "dump.h"

#include <stdio.h>

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* Text leaves the top level's members at the margin. */
static void indent(const struct out *o)
{
	printf("%*s", 2 * (o->json || !o->depth ? o->depth : o->depth - 1), "");
}

/* Start a member: its comma and key in JSON, its indentation and key in text. */
static void member(struct out *o, const char *key)
{
	if (o->json) {
		if (o->depth > 0 && o->items[o->depth - 1]++)
			putchar(',');
		if (o->depth > 0)
			putchar('\n');
		indent(o);
		if (key && !(o->depth > 0 && o->list[o->depth - 1])) {
			json_str(key);
			printf(": ");
		}
		return;
	}
	indent(o);
	if (key)
		printf("%s: ", key);
	else if (o->depth > 0 && o->list[o->depth - 1])
		printf("- ");
}

static void open_level(struct out *o, const char *key, int list)
{
	member(o, key);
	if (o->json)
		putchar(list ? '[' : '{');
	else if (o->depth > 0)
		putchar('\n');
	if (o->depth < OUT_DEPTH_MAX - 1)
		o->depth++;
	o->items[o->depth - 1] = 0;
	o->list[o->depth - 1] = list;
}

void out_obj(struct out *o, const char *key) { open_level(o, key, 0); }
void out_list(struct out *o, const char *key) { open_level(o, key, 1); }

void out_end(struct out *o)
{
	int had = o->items[o->depth - 1], list = o->list[o->depth - 1];

	o->depth--;
	if (!o->json)
		return;
	if (had) {
		putchar('\n');
		indent(o);
	}
	putchar(list ? ']' : '}');
	if (!o->depth)
		putchar('\n');
}

void out_u(struct out *o, const char *key, uint64_t v)
{
	member(o, key);
	printf("%llu%s", (unsigned long long)v, o->json ? "" : "\n");
}

void out_i(struct out *o, const char *key, int64_t v)
{
	member(o, key);
	printf("%lld%s", (long long)v, o->json ? "" : "\n");
}

void out_s(struct out *o, const char *key, const char *s)
{
	member(o, key);
	if (o->json)
		json_str(s);
	else
		printf("%s\n", s);
}

void out_b(struct out *o, const char *key, int v)
{
	member(o, key);
	printf("%s%s", v ? "true" : "false", o->json ? "" : "\n");
}

void out_mode(struct out *o, const char *key, uint32_t mode)
{
	member(o, key);
	printf(o->json ? "%u" : "0%o\n", mode);
}

void out_hex(struct out *o, const char *key, const uint8_t *p, size_t n)
{
	member(o, key);
	if (o->json)
		putchar('"');
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
	printf(o->json ? "\"" : "\n");
}
