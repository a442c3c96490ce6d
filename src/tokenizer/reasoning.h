/*
 * reasoning.h -- what the engine reads of a reasoning split besides its
 * public interface (hearth.h, "reasoning"): where the text stands, so
 * that a grammar constrains the answer alone and a reasoning budget
 * counts the reasoning's tokens (src/engine/thinking.c).
 */
#ifndef HEARTH_REASONING_H
#define HEARTH_REASONING_H

#include "internal.h"

/* Where the text read so far ends. */
enum reasoning_at {
    REASONING_AT_OPEN,       /* undecided: the answer may start here, or a
                              * reasoning block (think's start, text so far
                              * whitespace) or a message's header (harmony,
                              * between messages) */
    REASONING_AT_REASONING,  /* inside the reasoning */
    REASONING_AT_ANSWER,     /* inside the answer */
    REASONING_AT_OTHER,      /* neither: a harmony header being written, a
                              * tool call's arguments */
};

enum reasoning_at reasoning_split_at(const hearth_reasoning_split *split);

#endif /* HEARTH_REASONING_H */
