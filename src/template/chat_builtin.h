/*
 * chat_builtin.h -- the Jinja text of the built-in chat templates.
 */
#ifndef HEARTH_CHAT_BUILTIN_H
#define HEARTH_CHAT_BUILTIN_H

/* The template text called name, or NULL. */
const char *chat_builtin_text(const char *name);

#endif /* HEARTH_CHAT_BUILTIN_H */
