/* imgref.h — parsing the image references of lz_image_prepare (the forms
 * and store names are described in image.h). */
#pragma once

#include "util.h"

enum lz_ref_kind { LZ_REF_BUILTIN, LZ_REF_OCI, LZ_REF_OCI_ARCHIVE, LZ_REF_DOCKER_ARCHIVE, LZ_REF_REGISTRY };

struct lz_image_ref {
    enum lz_ref_kind kind;
    char *name;  /* store name */
    char *path;  /* local sources: absolute */
    char *tag;   /* local sources: optional */
    char *suite; /* builtin */
    char *agent; /* builtin:agent-NAME: NAME (agents.h), else NULL */
};

/* Parses ref; local source paths are made absolute (realpath). Free with
 * lz_image_ref_clear. */
int lz_image_ref_parse(const char *ref, struct lz_image_ref *p, struct lz_error *err);
void lz_image_ref_clear(struct lz_image_ref *p);
/* A Debian suite name for builtin:debian-<suite>: [a-z0-9-]{1,32}, not
 * starting with '-'. */
bool lz_image_suite_valid(const char *s);
