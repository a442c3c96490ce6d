/*
 * test-jinja.c -- the template interpreter: each feature against the
 * output of Python's Jinja2 configured as transformers configures it for
 * chat templates (the expected texts below are that reference's output),
 * the error cases with their positions, and the limits that keep hostile
 * templates from hanging or exhausting memory.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Rendered with messages = [{"role": "user", "content": "Hello!"}],
 * add_generation_prompt = true, bos_token "<s>", eos_token "</s>",
 * date "29 Nov 2026", and the variables of vars. */
struct render_case {
    const char *desc;
    const char *tmpl;
    const char *vars;
    const char *expect;
};

struct error_case {
    const char *desc;
    const char *tmpl;
    const char *vars;
    hearth_status status;
    const char *message;   /* a fragment of the error message */
};

static const char default_messages[] = "[{\"role\": \"user\", \"content\": \"Hello!\"}]";

/* Parse and render; returns the status, with the text in *out. */
static hearth_status render_text(const char *tmpl, size_t tmpl_len, const char *vars, char **out, size_t *len)
{
    hearth_template *t;
    *out = NULL;
    hearth_status st = hearth_template_parse(tmpl, tmpl_len, &t);
    if (st != HEARTH_OK) return st;
    hearth_chat_options opts = {true, "<s>", "</s>", NULL, "29 Nov 2026", vars};
    st = hearth_template_render(t, default_messages, strlen(default_messages), &opts, out, len);
    hearth_template_free(t);
    return st;
}

static const struct render_case render_cases[] = {
    {"plain text",
     "Hello, world!\n",
     "{}",
     "Hello, world!"},
    {"trailing newline kept once",
     "a\n\n",
     "{}",
     "a\n"},
    {"crlf normalised",
     "a\015\nb\015c",
     "{}",
     "a\nb\nc"},
    {"trim_blocks",
     "{% if true %}\nx\n{% endif %}\ny",
     "{}",
     "x\ny"},
    {"lstrip_blocks",
     "  {% if true %}\n  indented\n  {% endif %}\n  {# comment #}\nline",
     "{}",
     "  indented\nline"},
    {"lstrip not for print",
     "  {{ 'a' }}\n",
     "{}",
     "  a"},
    {"minus strips",
     "a  {%- if true -%}  b  {%- endif -%}  c {{- 'd' -}} e",
     "{}",
     "abcde"},
    {"plus keeps",
     "  {%+ if true %}x{% endif +%}\ny",
     "{}",
     "  x\ny"},
    {"comment strip",
     "a {#- c -#} b\n{# c #}\nd",
     "{}",
     "ab\nd"},
    {"raw",
     "{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  {{x}}  {%- endraw -%}|",
     "{}",
     "{{ not rendered }}|{{x}}|"},
    {"string escapes",
     "{{ 'a\\tb\\n\\x41\\u00e9\\U0001F600\\101\\\\q' }}",
     "{}",
     "a\tb\nA\303\251\360\237\230\200A\\q"},
    {"string concatenation literal",
     "{{ 'a' \"b\" 'c' }}",
     "{}",
     "abc"},
    {"brackets inside tags",
     "{{ {'a': {'b': 1}} }}",
     "{}",
     "{'a': {'b': 1}}"},
    {"arithmetic",
     "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 10 / 4 }}|{{ 1e3 }}|{{ 0.1 + 0.2 }}|{{ -3 }}|{{ +3 }}|{{ true + 1 }}",
     "{}",
     "7|9|3|-4|1|2|1.5|1024|0.5|2.5|1000.0|0.30000000000000004|-3|3|2"},
    {"float division and modulo",
     "{{ 1.0 // 0.3 }}|{{ -1.0 % 0.3 }}|{{ 5 % -3 }}|{{ -5 // 3 }}|{{ 1e308 * 10 }}|{{ -1e308 * 10 }}",
     "{}",
     "3.0|0.19999999999999996|-1|-2|inf|-inf"},
    {"integer literals",
     "{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5e3 }}|{{ 2E-2 }}",
     "{}",
     "1000|31|15|5|1500.0|0.02"},
    {"concat and repeat",
     "{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1] * 3 }}|{{ [1, 2] + [3] }}|{{ 'x' + 'y' }}|{{ 3 * 'z' }}",
     "{}",
     "a1NoneTrue|ababab|[1, 1, 1]|[1, 2, 3]|xy|zzz"},
    {"comparisons",
     "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ 'ell' in 'hello' }}{{ 2 not in [1, 3] }}{{ 'a' in {'a': 1} }}{{ 1 != 2 }}{{ 2 >= 2 }}{{ 1 <= 0 }}{{ true == 1 }}",
     "{}",
     "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue"},
    {"boolean operators return operands",
     "{{ not 1 }}|{{ 1 and 0 }}|{{ 0 or 'x' }}|{{ none or [] }}|{{ 'a' and 'b' }}|{{ not none }}",
     "{}",
     "False|0|x|[]|b|True"},
    {"conditional expression",
     "{{ 'yes' if 1 else 'no' }}|{{ 'yes' if 0 }}|{{ 'a' if none else 'b' if 1 else 'c' }}",
     "{}",
     "yes||b"},
    {"literals",
     "{{ none }}{{ None }}{{ true }}{{ False }}{{ [none, true, 1.5, \"it's\", 'say \"hi\"'] }}{{ (1,) }}{{ () }}{{ (1, 'a') }}{{ {'k': [1, {'z': none}]} }}",
     "{}",
     "NoneNoneTrueFalse[None, True, 1.5, \"it's\", 'say \"hi\"'](1,)()(1, 'a'){'k': [1, {'z': None}]}"},
    {"float repr",
     "{{ 1.5 }}|{{ 1e100 }}|{{ 1.5e-10 }}|{{ 123456789.123 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 2.0 }}",
     "{}",
     "1.5|1e+100|1.5e-10|123456789.123|1e+16|1000000000000000.0|0.0001|1e-05|-0.0|0.3333333333333333|2.0"},
    {"string repr in lists",
     "{{ ['a\\tb\\x01\\u00a0\\u00e9\\u200b\\\\\\''] }}",
     "{}",
     "[\"a\\tb\\x01\\xa0\303\251\\u200b\\\\'\"]"},
    {"attribute and item access",
     "{{ x.a }}{{ x['a'] }}{{ x.zz }}|{{ x.b.0 }}{{ x['b'][2] }}{{ x.b[-1] }}|{{ x.b[5] is defined }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "11|133|False"},
    {"undefined is lenient",
     "[{{ foo }}][{{ foo ~ 'x' }}][{{ foo|length }}][{{ foo|default('z') }}][{% for a in foo %}x{% endfor %}][{{ foo is defined }}][{{ not foo }}][{{ foo is undefined }}]",
     "{}",
     "[][x][0][z][][False][True][True]"},
    {"slices",
     "{{ x.s[0] }}{{ x.s[-1] }}|{{ x.s[1:4] }}|{{ x.s[::-1] }}|{{ x.s[::2] }}|{{ x.s[-3:] }}|{{ x.b[1:] }}|{{ x.b[::-1] }}|{{ [1,2,3,4,5][-2::-2] }}|{{ [1,2,3][5:] }}|{{ [1,2,3][:100] }}|{{ [1,2,3][-100:1] }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "Hd|ell|dlroW olleH|HloWrd|rld|[2, 3]|[3, 2, 1]|[4, 2]|[]|[1, 2, 3]|[1]"},
    {"unicode slices and length",
     "{{ u[1:4] }}|{{ u[-2:] }}|{{ u[::-1] }}|{{ u|length }}|{{ u[1] }}",
     "{\"u\": \"h\303\251llo w\303\266rld \346\227\245\346\234\254\"}",
     "\303\251ll|\346\227\245\346\234\254|\346\234\254\346\227\245 dlr\303\266w oll\303\251h|14|\303\251"},
    {"if elif else",
     "{% for i in [1, 2, 3, 4] %}{% if i == 1 %}one{% elif i == 2 %}two{% elif i == 3 %}three{% else %}many{% endif %};{% endfor %}",
     "{}",
     "one;two;three;many;"},
    {"loop variables",
     "{% for i in x.b %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"loop previtem nextitem cycle",
     "{% for i in x.b %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "-2-a;1-3-b;2--a;"},
    {"loop else and filter",
     "{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in x.b if i > 1 %}{{ i }}{{ loop.length }}{{ loop.first }}{% endfor %}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "empty|22True32False"},
    {"loop over dict, items and string",
     "{% for k, v in x.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in x %}{{ k }}{% endfor %}|{% for c in 'abc' %}{{ c }}.{% endfor %}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "a=1;b=[1, 2, 3];s=Hello World;n=None;t=True;|absnt|a.b.c."},
    {"nested loops",
     "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{% endfor %}",
     "{}",
     "111x 121y 212x 222y "},
    {"break and continue",
     "{% for i in range(10) %}{% if i == 3 %}{% continue %}{% endif %}{% if i == 6 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     "01245"},
    {"loop scope",
     "{% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}",
     "{}",
     "12121"},
    {"set in loop does not persist",
     "{% for i in range(3) %}{% if i == 0 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %}",
     "{}",
     "[a][][]"},
    {"namespace",
     "{% set ns = namespace(c=0, l=[], found=false) %}{% for i in range(5) %}{% set ns.c = ns.c + i %}{% set ns.l = ns.l + [i] %}{% if i == 3 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.c }}{{ ns.l }}{{ ns.found }}{{ ns.missing is defined }}",
     "{}",
     "10[0, 1, 2, 3, 4]TrueFalse"},
    {"namespace from dict",
     "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns }}",
     "{}",
     "12<Namespace {'a': 1, 'b': 2}>"},
    {"set tuple",
     "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2, 3) %}{{ t }}{{ t|length }}{% set p, q = 'xy' %}{{ q }}{{ p }}",
     "{}",
     "12(1, 2, 3)3yx"},
    {"block set",
     "{% set v %}block {{ 1 + 1 }}{% endset %}[{{ v }}]{% set w | upper | replace('O', '0') %}shout{% endset %}{{ w }}",
     "{}",
     "[block 2]SH0UT"},
    {"top-level set overrides a variable",
     "{% set messages = messages + [{'role': 'x'}] %}{{ messages|length }}{{ messages[-1].role }}",
     "{}",
     "2x"},
    {"macro",
     "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', greeting='Hi') }} {{ greet(name='Z') }} [{{ greet() }}]",
     "{}",
     "Hello, Bob! Hi, Al! Hello, Z! [Hello, !]"},
    {"macro varargs kwargs",
     "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}",
     "{}",
     "1(2, 3){'k': 4}"},
    {"macro sees top-level variables",
     "{% macro show() %}{{ v }}{% endmacro %}{% set v = 5 %}{{ show() }}",
     "{}",
     "5"},
    {"recursive macro",
     "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}",
     "{}",
     "720"},
    {"call block",
     "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ 1 + 1 }}{% endcall %}",
     "{}",
     "<b>inner 2</b>"},
    {"call block with arguments",
     "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}",
     "{}",
     "[1][2]"},
    {"filter block and with",
     "{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% with a = 5, b = 6 %}{{ a + b }}{% endwith %}|{{ a }}",
     "{}",
     "HELLO X|11|"},
    {"print tag",
     "{% print 'a', 1 %}",
     "{}",
     "a1"},
    {"case filters",
     "{{ x.s|upper }}|{{ x.s|lower }}|{{ 'hello wORLD-foo (bar'|title }}|{{ 'hello WORLD'|capitalize }}|{{ u|upper }}|{{ '\303\237'|upper }}|{{ '\303\200\303\211\303\216'|lower }}|{{ u|title }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}, \"u\": \"h\303\251llo w\303\266rld \346\227\245\346\234\254\"}",
     "HELLO WORLD|hello world|Hello World-Foo (Bar|Hello world|H\303\211LLO W\303\226RLD \346\227\245\346\234\254|SS|\303\240\303\251\303\256|H\303\251llo W\303\266rld \346\227\245\346\234\254"},
    {"trim",
     "[{{ '  a  '|trim }}][{{ 'xxaxx'|trim('x') }}][{{ '\\u3000a\\n\\t'|trim }}][{{ none|trim }}]",
     "{}",
     "[a][a][a][None]"},
    {"replace",
     "{{ 'hello'|replace('l', 'L') }}|{{ 'hello'|replace('l', 'L', 1) }}|{{ 'abc'|replace('', '-') }}",
     "{}",
     "heLLo|heLlo|-a-b-c-"},
    {"sort unique first last length join",
     "{{ items|sort }}{{ items|sort(reverse=true) }}{{ items|sort(case_sensitive=true) }}{{ items|unique|list }}{{ items|unique(case_sensitive=true)|list }}{{ items|first }}{{ items|last }}{{ items|length }}{{ items|count }}{{ items|join(', ') }}{{ [1, 'a', none]|join }}",
     "{\"items\": [\"b\", \"A\", \"a\", \"c\"]}",
     "['A', 'a', 'b', 'c']['c', 'b', 'A', 'a']['A', 'a', 'b', 'c']['b', 'A', 'c']['b', 'A', 'a', 'c']bc44b, A, a, c1aNone"},
    {"sort by attribute",
     "{{ [[2, 1], [1, 2]]|sort }}{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}{{ [{'n': {'m': 'B'}}, {'n': {'m': 'a'}}]|sort(attribute='n.m')|map(attribute='n.m')|list }}",
     "{}",
     "[[1, 2], [2, 1]][{'n': 1}, {'n': 2}]['a', 'B']"},
    {"sum min max abs round",
     "{{ nums|sum }}|{{ nums|min }}|{{ nums|max }}|{{ nums|map('abs')|list }}|{{ [{'v': 2}, {'v': 3}]|sum(attribute='v') }}|{{ [[1], [2]]|sum(start=[]) }}|{{ ['b', 'A']|min }}|{{ []|max is defined }}",
     "{\"nums\": [3, 1.5, -2, 7]}",
     "9.5|-2|7|[3, 1.5, 2, 7]|5|[1, 2]|A|False"},
    {"select reject",
     "{{ nums|select('gt', 0)|list }}{{ nums|reject('gt', 0)|list }}{{ [0, 1, '', 'a', none]|select|list }}{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3]|reject('in', [2])|list }}",
     "{\"nums\": [3, 1.5, -2, 7]}",
     "[3, 1.5, 7][-2][1, 'a'][1, 3][1, 3]"},
    {"map selectattr rejectattr",
     "{{ msgs|map(attribute='role')|list }}|{{ msgs|selectattr('role', 'equalto', 'user')|list }}|{{ msgs|rejectattr('tool_calls')|list|length }}|{{ msgs|selectattr('tool_calls', 'defined')|list|length }}|{{ msgs|map(attribute='name', default='?')|list }}|{{ msgs|selectattr('tool_calls', 'defined')|map(attribute='tool_calls.0.id')|list }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", \"arguments\": {\"k\": \"v\", \"n\": 2}}}]}, {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"c1\"}]}",
     "['user', 'assistant', 'tool']|[{'role': 'user', 'content': 'hi'}]|2|1|['?', '?', '?']|['c1']"},
    {"tojson",
     "{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ msgs[1].tool_calls[0].function.arguments|tojson }}|{{ u|tojson }}|{{ 'a\"b\\\\c\\n\\t\\u0001\\u007f'|tojson }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}, \"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", \"arguments\": {\"k\": \"v\", \"n\": 2}}}]}, {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"c1\"}], \"u\": \"h\303\251llo w\303\266rld \346\227\245\346\234\254\"}",
     "{\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}|{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2,\n    3\n  ],\n  \"s\": \"Hello World\",\n  \"n\": null,\n  \"t\": true\n}|{\"k\": \"v\", \"n\": 2}|\"h\303\251llo w\303\266rld \346\227\245\346\234\254\"|\"a\\\"b\\\\c\\n\\t\\u0001\177\""},
    {"tojson options",
     "{{ {'b': 1, 'a': [1, {'c': none}]}|tojson(indent=4) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson }}|{{ [1.0, 1e20, 1e-7, -0.0, 3]|tojson }}|{{ x|tojson(indent=1, sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}|{{ '\303\251\360\237\230\200'|tojson(ensure_ascii=true) }}|{{ [1, [2]]|tojson(indent='\\t') }}|{{ [1]|tojson(indent=0) }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "{\n    \"b\": 1,\n    \"a\": [\n        1,\n        {\n            \"c\": null\n        }\n    ]\n}|[]|{}|[1.0, 1e+20, 1e-07, -0.0, 3]|{\n \"a\": 1,\n \"b\": [\n  1,\n  2,\n  3\n ],\n \"n\": null,\n \"s\": \"Hello World\",\n \"t\": true\n}|{\"a\":1,\"b\":[1,2,3],\"s\":\"Hello World\",\"n\":null,\"t\":true}|\"\\u00e9\\ud83d\\ude00\"|[\n\t1,\n\t[\n\t\t2\n\t]\n]|[\n1\n]"},
    {"dictsort items",
     "{{ x|dictsort }}|{{ {'b': 2, 'A': 1, 'a': 3}|dictsort }}|{{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}|{{ x|items|list }}|{{ foo|items|list }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "[('a', 1), ('b', [1, 2, 3]), ('n', None), ('s', 'Hello World'), ('t', True)]|[('A', 1), ('a', 3), ('b', 2)]|[('b', 2), ('a', 1)]|[('a', 1), ('b', [1, 2, 3]), ('s', 'Hello World'), ('n', None), ('t', True)]|[]"},
    {"int float",
     "{{ 3.7|int }}{{ '42'|int }}{{ '4.2'|int }}{{ 'x'|int }}{{ 'x'|int(7) }}{{ '0x1A'|int(0, 16) }}{{ 'A'|int(base=16) }}{{ '  12  '|int }}{{ '1_000'|int }}{{ '1e3'|int }}{{ true|int }}|{{ '3'|float }}{{ 'x'|float }}{{ 'inf'|float }}{{ ' -1.5e3 '|float }}{{ 2|float }}",
     "{}",
     "342407261012100010001|3.00.0inf-1500.02.0"},
    {"round abs",
     "{{ -3|abs }}{{ -2.5|abs }}|{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 3|round }}{{ 42.55|round(1, 'floor') }}{{ 42.51|round(1, 'ceil') }}{{ 1234|round(-2) }}",
     "{}",
     "32.5|2.04.02.67342.542.61200"},
    {"string default safe escape",
     "{{ 1.5|string }}{{ [1, 'a']|string }}{{ none|string }}|{{ none|default('d') }}{{ zz|default('d') }}{{ ''|default('d', true) }}{{ zz|d('e') }}{{ 0|default(5) }}|{{ '<a href=\"x\">&\\'</a>'|e }}{{ 'x'|safe }}",
     "{}",
     "1.5[1, 'a']None|Nonedde0|&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;x"},
    {"indent wordcount center",
     "{{ 'hello world, foo-bar'|wordcount }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'ab'|center(6) }}|{{ 'abc'|center(6) }}|",
     "{}",
     "4|a\n  b\n\n  c|  a\n  b|a\n  \n  b|a\n> b|  ab  | abc  |"},
    {"list reverse batch first last",
     "{{ x.b|reverse|list }}{{ 'abc'|reverse }}{{ 'abc'|list }}{{ x|list }}{{ x.b|batch(2)|list }}{{ x.b|batch(2, 0)|list }}{{ 'abc'|first }}{{ 'abc'|last }}{{ x|first }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "[3, 2, 1]cba['a', 'b', 'c']['a', 'b', 's', 'n', 't'][[1, 2], [3]][[1, 2], [3, 0]]aca"},
    {"format filter and operator",
     "{{ '%s and %d and %.2f and %5s|%-5s|%05d %x %r' % ('a', 3, 3.14159, 'b', 'c', 42, 255, 'q') }}|{{ '%s-%s'|format(1, 2) }}|{{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }}|{{ '%s' % none }}{{ '%s%%' % 5 }}{{ '%c' % 65 }}{{ '%5.1f|' % 3.14159 }}{{ '%+d %+d' % (5, -5) }}{{ '%o %X %e %g' % (8, 255, 12345.678, 0.00001234) }}",
     "{}",
     "a and 3 and 3.14 and     b|c    |00042 ff 'q'|1-2|x-2|None5%A  3.1|+5 -510 FF 1.234568e+04 1.234e-05"},
    {"truncate",
     "{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}|{{ 'foo bar baz qux'|truncate(11, false, '..', 0) }}|{{ 'short'|truncate(9) }}",
     "{}",
     "foo...|foo ba...|foo bar..|short"},
    {"safe strings escape what is added to them",
     "{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('<b>'|safe) }}|{{ ('<b>'|safe) ~ '<i>' }}|{{ '<&>'|e }}|{{ '<&>'|e|e }}|{{ ('<b>'|safe)|forceescape }}|{{ ('a'|safe) + ('<'|safe) }}|{{ '<x>' + '<y>' }}",
     "{}",
     "<b>&lt;i&gt;|&lt;i&gt;<b>|<b><i>|&lt;&amp;&gt;|&lt;&amp;&gt;|&lt;b&gt;|a<|<x><y>"},
    {"filters over false values give nothing",
     "{{ none|select|list }}{{ none|map('upper')|list }}{{ 0|selectattr('x')|list }}{{ ''|rejectattr('x', 'nosuchtest')|list }}{{ []|map(attribute='a')|list }}",
     "{}",
     "[][][][][]"},
    {"attr and pprint",
     "{{ x|attr('a') }}|{{ x|attr('keys') is callable }}|{{ [1, 'a']|pprint }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "|True|[1, 'a']"},
    {"tests",
     "{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.5 is float }}{{ 1 is integer }}{{ {} is mapping }}{{ [] is iterable }}{{ 'x' is iterable }}{{ 1 is iterable }}{{ 'x' is lower }}{{ 'X' is upper }}{{ none is none }}{{ 1 is sameas 1 }}{{ 2 is in [1, 2] }}{{ 3 is gt 2 }}{{ 3 is ne 3 }}{{ true is true }}{{ 0 is false }}{{ x is sequence }}{{ 1 is boolean }}{{ range is callable }}{{ 'trim' is filter }}{{ 'odd' is test }}{{ 3 is ge 3 }}{{ 2 is lessthan 3 }}{{ 'a' is eq 'a' }}{{ x.a is not defined }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueFalseTrueFalseTrueFalseTrueTrueTrueTrueTrueTrueFalse"},
    {"str split",
     "{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ '  a b  c '.rsplit(None, 1) }}{{ '  a  b c  '.split(None, 1) }}{{ ' a b '.rsplit(None, 1) }}{{ 'x\\ny\\r\\nz'.splitlines() }}{{ 'x\\ny\\n'.splitlines(true) }}{{ ''.split() }}{{ ''.split(',') }}",
     "{}",
     "['a', 'b', '', 'c']['a', 'b']['a', 'b c']['a b', 'c']['  a b', 'c']['a', 'b c  '][' a', 'b']['x', 'y', 'z']['x\\n', 'y\\n'][]['']"},
    {"str find replace affixes",
     "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('lo', 'x')) }}{{ 'hello'.startswith('l', 2) }}{{ 'hello'.replace('l', 'L') }}{{ 'hello'.replace('l', 'L', 1) }}{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.find('z') }}{{ 'hello'.count('l') }}{{ 'h\303\251llo'.index('l') }}{{ 'abc'.removeprefix('a') }}{{ 'abc'.removesuffix('c') }}{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }}",
     "{}",
     "TrueTrueTrueheLLoheLlo23-122bcab('a', '=', 'b=c')('a=b', '=', 'c')"},
    {"str strip case",
     "[{{ '  x '.strip() }}][{{ '  x '.lstrip() }}][{{ '  x '.rstrip() }}][{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xyhixy'.strip('yx') }}]{{ \"they're bill's\".title() }}{{ 'hELLO'.capitalize() }}{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}",
     "{}",
     "[x][x ][  x][x][hi]They'Re Bill'SHelloABab"},
    {"str classes and padding",
     "{{ '123'.isdigit() }}{{ 'a1'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'a1'.isalnum() }}{{ '  '.isspace() }}{{ ''.isspace() }}{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}|{{ 'a'.ljust(3, '*') }}|{{ 'a'.rjust(3) }}|{{ 'a'.center(4, '-') }}|{{ '-5'.zfill(4) }}|{{ ', '.join(['a', 'b']) }}",
     "{}",
     "TrueFalseTrueTrueTrueFalseTrueTrue|a**|  a|-a--|-005|a, b"},
    {"str format method",
     "{{ '{} {} {}'.format(1, 'b', none) }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='x') }}|{{ '{:>5}|{:<5}|{:^5}|{:.2f}|{:05d}|{:x}|{!r}'.format('a', 'b', 'c', 3.14159, 42, 255, 'q') }}|{{ '{{}}{0[1]}{1.a}'.format([5, 6], {'a': 7}) }}",
     "{}",
     "1 b None|aba|x!|    a|b    |  c  |3.14|00042|ff|'q'|{}67"},
    {"dict methods",
     "{{ x.get('a') }}{{ x.get('q', 9) }}{{ x.get('q') }}{{ x.keys()|list }}{{ x.values()|list|length }}{{ x.items()|list|first }}{{ {'items': 5}['items'] }}",
     "{\"x\": {\"a\": 1, \"b\": [1, 2, 3], \"s\": \"Hello World\", \"n\": null, \"t\": true}}",
     "19None['a', 'b', 's', 'n', 't']5('a', 1)5"},
    {"list methods",
     "{{ [1, 2, 3].index(2) }}{{ [1, 2, 2].count(2) }}",
     "{}",
     "12"},
    {"globals",
     "{{ dict(a=1, b=2) }}{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}{{ namespace(a=1).a }}|{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ messages }}{{ date_string }}",
     "{}",
     "{'a': 1, 'b': 2}[0, 1, 2][1, 4, 7][5, 3, 1][]1|<s></s>True[{'role': 'user', 'content': 'Hello!'}]29 Nov 2026"},
    {"strftime_now",
     "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %A %B %j %-d %a %y %H:%M:%S %p %%') }}",
     "{}",
     "29 Nov 2026|2026-11-29 Sunday November 333 29 Sun 26 00:00:00 AM %"},
    {"tool calls",
     "{% for m in msgs %}{% if m.role == 'user' %}U:{{ m.content }}{% elif m.role == 'assistant' %}A:{{ m.content if m.content is not none else '' }}{% for t in m.tool_calls %}[{{ t.function.name }}({{ t.function.arguments|tojson }})]{% endfor %}{% else %}{{ m.role }}:{{ m.content }}({{ m.tool_call_id }}){% endif %}\n{% endfor %}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", \"arguments\": {\"k\": \"v\", \"n\": 2}}}]}, {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"c1\"}]}",
     "U:hiA:[f({\"k\": \"v\", \"n\": 2})]tool:42(c1)"},
};

static const struct error_case error_cases[] = {
    {"undefined attribute", "{{ foo.bar }}", "{}", HEARTH_E_TEMPLATE,
     "line 1, column 7: 'foo' is undefined"},
    {"undefined arithmetic", "\n\n  {{ foo + 1 }}", "{}", HEARTH_E_TEMPLATE,
     "line 3, column 10: 'foo' is undefined"},
    {"attribute of a missing key", "{{ x.nokey.deeper }}", "{\"x\": {}}", HEARTH_E_TEMPLATE,
     "'dict object' has no attribute 'nokey'"},
    {"failing left operand of a comparison", "{% if messages[0].nope.deeper == 'system' %}x{% endif %}", "{}", HEARTH_E_TEMPLATE,
     "'dict object' has no attribute 'nope'"},
    {"type error", "{{ 'a' + 1 }}", "{}", HEARTH_E_TEMPLATE,
     "can only concatenate str (not \"int\") to str"},
    {"division by zero", "{{ 1 / 0 }}", "{}", HEARTH_E_TEMPLATE,
     "division by zero"},
    {"comparison type error", "{{ 1 < 'a' }}", "{}", HEARTH_E_TEMPLATE,
     "'<' not supported between instances of 'int' and 'str'"},
    {"not iterable", "{% for a in 5 %}{% endfor %}", "{}", HEARTH_E_TEMPLATE,
     "'int' object is not iterable"},
    {"not callable", "{{ x() }}", "{\"x\": {}}", HEARTH_E_TEMPLATE,
     "'dict' object is not callable"},
    {"unknown filter", "{{ 'x' | nosuchfilter }}", "{}", HEARTH_E_TEMPLATE,
     "unknown filter 'nosuchfilter'"},
    {"unknown test", "{% if 1 is nosuchtest %}{% endif %}", "{}", HEARTH_E_TEMPLATE,
     "unknown test 'nosuchtest'"},
    {"raise_exception", "{% if true %}\n  {{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}", "{}", HEARTH_E_TEMPLATE,
     "line 2, column 6: Only user and assistant roles are supported!"},
    {"immutable list", "{% set l = [1, 2] %}{{ l.append(3) }}", "{}", HEARTH_E_TEMPLATE,
     "'list object' has no attribute 'append'"},
    {"namespace assignment on a non-namespace", "{% set a = 1 %}{% set a.b = 2 %}", "{}", HEARTH_E_TEMPLATE,
     "it is not a namespace"},
    {"unpacking", "{% for a, b in [[1, 2], [3]] %}{% endfor %}", "{}", HEARTH_E_TEMPLATE,
     "not enough values to unpack (expected 2, got 1)"},
    {"bad format", "{{ '%d' % 'a' }}", "{}", HEARTH_E_TEMPLATE,
     "%d format: a real number is required, not str"},
    {"slice step zero", "{{ 'abc'[::0] }}", "{}", HEARTH_E_TEMPLATE,
     "slice step cannot be zero"},
    {"unterminated for", "{% for m in messages %}\n{{ m }}", "{}", HEARTH_E_FORMAT,
     "line 2, column 8: unexpected end of template: the 'for' at line 1, column 4 was never closed (expected 'endfor' or 'else')"},
    {"unterminated if", "{% if true %}x{% elif false %}y", "{}", HEARTH_E_FORMAT,
     "was never closed (expected 'elif' or 'else' or 'endif')"},
    {"mismatched end", "{% for a in b %}{% endif %}", "{}", HEARTH_E_FORMAT,
     "line 1, column 20: unexpected 'endif': the 'for' at line 1, column 4 expects 'endfor' or 'else'"},
    {"end without block", "{% endfor %}", "{}", HEARTH_E_FORMAT,
     "unexpected 'endfor': no block is open"},
    {"unterminated print", "{{ 1 + 2", "{}", HEARTH_E_FORMAT,
     "this tag has no closing '}}'"},
    {"unterminated block tag", "{% if true", "{}", HEARTH_E_FORMAT,
     "this tag has no closing '%}'"},
    {"unterminated comment", "a {# never closed", "{}", HEARTH_E_FORMAT,
     "line 1, column 3: missing '#}'"},
    {"unterminated string", "{{ 'abc }}", "{}", HEARTH_E_FORMAT,
     "unterminated string literal"},
    {"unterminated raw", "{% raw %}abc", "{}", HEARTH_E_FORMAT,
     "missing {% endraw %}"},
    {"bad bracket", "{{ (1 }}", "{}", HEARTH_E_FORMAT,
     "unexpected '}', expected ')'"},
    {"missing operand", "{{ 1 + }}", "{}", HEARTH_E_FORMAT,
     "unexpected end of print statement '}}'"},
    {"unknown tag", "{% foo %}", "{}", HEARTH_E_FORMAT,
     "unknown tag 'foo'"},
    {"unsupported tag", "{% include 'x.jinja' %}", "{}", HEARTH_E_FORMAT,
     "the 'include' tag is not supported"},
    {"break outside loop", "{% break %}", "{}", HEARTH_E_FORMAT,
     "'break' outside of a for loop"},
    {"default before non-default parameter", "{% macro m(a=1, b) %}{% endmacro %}", "{}", HEARTH_E_FORMAT,
     "non-default parameter follows default parameter"},
    {"bad character", "{{ 1 $ 2 }}", "{}", HEARTH_E_FORMAT,
     "unexpected character '$'"},
    {"bad escape", "{{ '\\x4' }}", "{}", HEARTH_E_FORMAT,
     "truncated \\x escape"},
    {"surrogate escape", "{{ '\\ud83d' }}", "{}", HEARTH_E_FORMAT,
     "surrogate escape"},
    {"assignment to a literal", "{% set 1 = 2 %}", "{}", HEARTH_E_FORMAT,
     "cannot assign to this expression"},
};


START_TEST(test_render)
{
    const struct render_case *c = &render_cases[_i];
    char *out;
    size_t len;
    hearth_status st = render_text(c->tmpl, strlen(c->tmpl), c->vars, &out, &len);
    ck_assert_msg(st == HEARTH_OK, "%s: status %d: %s", c->desc, st, hearth_last_error());
    ck_assert_msg(len == strlen(c->expect) && memcmp(out, c->expect, len) == 0,
                  "%s:\n got  [%s]\n want [%s]", c->desc, out, c->expect);
    hearth_free(out);
}
END_TEST

START_TEST(test_errors)
{
    const struct error_case *c = &error_cases[_i];
    char *out;
    size_t len;
    hearth_status st = render_text(c->tmpl, strlen(c->tmpl), c->vars, &out, &len);
    ck_assert_msg(st == c->status, "%s: status %d (want %d): %s", c->desc, st, c->status,
                  st == HEARTH_OK ? out : hearth_last_error());
    ck_assert_msg(strstr(hearth_last_error(), c->message) != NULL, "%s: message '%s' lacks '%s'",
                  c->desc, hearth_last_error(), c->message);
    ck_assert_msg(strncmp(hearth_last_error(), "chat template line ", 19) == 0,
                  "%s: message without a position: %s", c->desc, hearth_last_error());
    ck_assert_ptr_null(out);
}
END_TEST

/* Behaviour that the reference does not have, or has only with
 * transformers' extensions. */
START_TEST(test_hearth_specific)
{
    static const struct { const char *tmpl; const char *expect; } cases[] = {
        /* transformers' {% generation %} block renders its body */
        {"{% generation %}gen {{ 1 }}{% endgeneration %}", "gen 1"},
        /* embedded NUL characters survive */
        {"a{{ '\\x00' }}b", "a\0b"},
        /* an empty template renders nothing */
        {"", ""},
        {"{# only a comment #}\n", ""},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(cases); i++) {
        char *out;
        size_t len;
        hearth_status st = render_text(cases[i].tmpl, strlen(cases[i].tmpl), NULL, &out, &len);
        ck_assert_msg(st == HEARTH_OK, "case %zu: %s", i, hearth_last_error());
        size_t want = i == 1 ? 3 : strlen(cases[i].expect);
        ck_assert_msg(len == want && memcmp(out, cases[i].expect, want) == 0, "case %zu: got [%s]", i, out);
        hearth_free(out);
    }
}
END_TEST

/* A template built by repeating piece n times between head and tail. */
static char *repeated(const char *head, const char *piece, int n, const char *tail)
{
    size_t len = strlen(head) + strlen(piece) * (size_t)n + strlen(tail) + 1;
    char *s = malloc(len);
    ck_assert_ptr_nonnull(s);
    strcpy(s, head);
    for (int i = 0; i < n; i++) strcat(s, piece);
    strcat(s, tail);
    return s;
}

static void expect_failure(const char *tmpl, hearth_status want, const char *fragment)
{
    char *out;
    size_t len;
    hearth_status st = render_text(tmpl, strlen(tmpl), NULL, &out, &len);
    ck_assert_msg(st == want, "status %d (want %d) for %.80s: %s", st, want, tmpl,
                  st == HEARTH_OK ? "rendered" : hearth_last_error());
    ck_assert_msg(strstr(hearth_last_error(), fragment) != NULL, "message '%s' lacks '%s'",
                  hearth_last_error(), fragment);
}

START_TEST(test_limits)
{
    /* runaway loops stop at the iteration limit */
    expect_failure("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
                   HEARTH_E_RANGE, "more than 1000000 loop iterations");
    /* unbounded recursion stops at the macro call limit */
    expect_failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", HEARTH_E_RANGE,
                   "macro calls nested more than 40 deep");
    /* huge ranges, strings and outputs are refused before they are built */
    expect_failure("{{ range(1000000000)|length }}", HEARTH_E_RANGE, "range() of 1000000000 items");
    expect_failure("{{ 'x' * 1000000000 }}", HEARTH_E_RANGE, "repeated string longer than");
    expect_failure("{% set ns = namespace(s='12345678') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   HEARTH_E_RANGE, "size limit");
    expect_failure("{% for i in range(200000) %}{{ 'y' * 1000 }}{% endfor %}", HEARTH_E_RANGE,
                   "exceed its size limit");
    /* work that grows quadratically runs into the work budget */
    expect_failure("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                   HEARTH_E_RANGE, "work units");
    /* values nested without end */
    expect_failure("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}",
                   HEARTH_E_RANGE, "nested more than 512 levels");
}
END_TEST

START_TEST(test_nesting_limits)
{
    /* deeply nested expressions and blocks are parse errors, not stack
     * overflows */
    char *expr = repeated("{{ ", "(", 5000, "1 }}");
    expect_failure(expr, HEARTH_E_FORMAT, "nested more than");
    free(expr);
    expr = repeated("{{ ", "[", 5000, "");
    expect_failure(expr, HEARTH_E_FORMAT, "nested more than");
    free(expr);
    expr = repeated("{{ ", "not ", 5000, "1 }}");
    expect_failure(expr, HEARTH_E_FORMAT, "nested more than");
    free(expr);
    expr = repeated("{{ ", "-", 5000, "1 }}");
    expect_failure(expr, HEARTH_E_FORMAT, "nested more than");
    free(expr);
    expr = repeated("{{ 1", " if 1 else 2", 5000, " }}");
    expect_failure(expr, HEARTH_E_FORMAT, "nested more than");
    free(expr);
    char *blocks = repeated("", "{% if true %}", 5000, "");
    expect_failure(blocks, HEARTH_E_FORMAT, "nested more than");
    free(blocks);
    /* but long flat chains are fine: elif chains, operators, filters */
    char *chain = repeated("{% if false %}", "{% elif false %}", 3000, "{% else %}ok{% endif %}");
    char *out;
    size_t len;
    ck_assert_int_eq(render_text(chain, strlen(chain), NULL, &out, &len), HEARTH_OK);
    ck_assert_str_eq(out, "ok");
    hearth_free(out);
    free(chain);
    chain = repeated("{{ 0", " + 1", 300, " }}");
    ck_assert_int_eq(render_text(chain, strlen(chain), NULL, &out, &len), HEARTH_OK);
    ck_assert_str_eq(out, "300");
    hearth_free(out);
    free(chain);
    /* left-nested operators are parsed without recursion but evaluated
     * recursively: a chain longer than the evaluation limit stops there */
    chain = repeated("{{ 0", " + 1", 3000, " }}");
    expect_failure(chain, HEARTH_E_RANGE, "evaluation nested more than 400 levels");
    free(chain);
    chain = repeated("{{ 'a'", " | upper", 3000, " }}");
    expect_failure(chain, HEARTH_E_RANGE, "evaluation nested more than 400 levels");
    free(chain);
}
END_TEST

START_TEST(test_invalid_template_text)
{
    /* invalid UTF-8 in the template is a parse error with its position */
    const char bad[] = "ab\n c\xff";
    hearth_template *t;
    ck_assert_int_eq(hearth_template_parse(bad, sizeof bad - 1, &t), HEARTH_E_FORMAT);
    ck_assert_str_eq(hearth_last_error(), "chat template line 2, column 3: invalid UTF-8 (byte 0xff at offset 5)");
    /* templates need not be NUL-terminated, and may be empty */
    ck_assert_int_eq(hearth_template_parse("{{ 1 }}garbage", 7, &t), HEARTH_OK);
    char *out;
    ck_assert_int_eq(hearth_template_render(t, "[]", 2, NULL, &out, NULL), HEARTH_OK);
    ck_assert_str_eq(out, "1");
    hearth_free(out);
    hearth_template_free(t);
    ck_assert_int_eq(hearth_template_parse(NULL, 0, &t), HEARTH_OK);
    hearth_template_free(t);
    ck_assert_int_eq(hearth_template_parse(NULL, 1, &t), HEARTH_E_INVALID);
}
END_TEST

static Suite *jinja_suite(void)
{
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("render");
    tcase_add_loop_test(tc, test_render, 0, (int)HEARTH_ARRAY_LEN(render_cases));
    tcase_add_loop_test(tc, test_errors, 0, (int)HEARTH_ARRAY_LEN(error_cases));
    tcase_add_test(tc, test_hearth_specific);
    tcase_add_test(tc, test_invalid_template_text);
    suite_add_tcase(s, tc);
    TCase *limits = tcase_create("limits");
    tcase_add_test(limits, test_limits);
    tcase_add_test(limits, test_nesting_limits);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return test_run_suite(jinja_suite());
}
