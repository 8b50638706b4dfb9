/* The compiled twin of two hot functions (issue 12): JSONScanner.feed (_scanner.py) and
 * take_common_chunk (_fast.py).
 *
 * Why C: inside a live HTTP stream the per-chunk work runs after ~90 us of the SDK's own decoding,
 * with cold caches, and then costs about three times what it costs in a tight loop; what it costs
 * there grows with the bytecodes executed, not with any one hot spot. The same decisions made in
 * C touch a fraction of the memory.
 *
 * The rules that keep it honest:
 *  - The Python functions are the reference. This file does exactly what they do, in the same
 *    order, with the same messages; tests/core/test_speedups.py and tests/core/test_fast_path.py
 *    feed the same input to both and compare everything (hypothesis, the corpus, hostile chunks).
 *  - Anything this file does not recognise exactly (a subclass, a field of another type, a slot
 *    not set, a number beyond a machine word) is declined: the chunk goes to the general path, the
 *    scanner text to the Python scanner. Declining is always safe; guessing never is.
 *  - toolstitch's own objects are read through their __slots__ offsets, resolved once in bind()
 *    from the classes' member descriptors and used only on objects of exactly those classes.
 *  - Built only when a compiler is there (setup.py: optional). TOOLSTITCH_PURE_PYTHON=1 skips it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#ifdef Py_GIL_DISABLED
#error "the slot writes below assume the GIL; the free-threaded build uses the Python code"
#endif

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif
#ifndef Py_READONLY
#define Py_READONLY READONLY
#endif

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* -- what bind() resolves --------------------------------------------------------------------- */

static int bound = 0, scanner_bound = 0;
static PyTypeObject *T_Scanner, *T_Choice, *T_Table, *T_Call, *T_Metrics, *T_Chain, *T_Chunk,
    *T_SdkChoice, *T_Delta, *T_Entry, *T_Function;
static PyObject *fallback_take; /* the Python take_common_chunk: chunks that are not SDK objects */
static PyTypeObject *T_ContentDelta, *T_ArgumentsDelta;
static PyObject *ArgumentsComplete, *ArgumentsMalformed;
static PyObject *empty_tuple, *empty_str;
static Py_ssize_t batch_size;

/* scanner */
static Py_ssize_t o_s_escape, o_s_hex_left, o_s_in_string, o_s_stack, o_s_complete, o_s_complete_at,
    o_s_error, o_s_error_at, o_s_offset;
/* choice state, call table, chain */
static Py_ssize_t o_c_content, o_c_finish_reason, o_c_table, o_t_by_index, o_t_chains, o_chain_last;
/* tool call */
static Py_ssize_t o_k_fast, o_k_bytes_left, o_k_slot, o_k_chars, o_k_metrics, o_k_parts, o_k_done,
    o_k_joined, o_k_scanner;
/* the two events nearly every chunk makes */
static Py_ssize_t o_e_content_choice, o_e_content_text, o_e_arguments_call, o_e_arguments_text;
/* call metrics */
static Py_ssize_t o_m_fragments, o_m_bytes, o_m_first_argument_at, o_m_arguments_complete_at;

static PyObject *s_closer_brace, *s_closer_bracket; /* "}" and "]" */
static PyObject *n_pydantic_extra, *n_envelope_unset, *n_choices, *n_bytes_left, *n_clock;
static PyObject *k_usage, *k_choices, *k_index, *k_finish_reason, *k_logprobs, *k_delta, *k_role,
    *k_refusal, *k_function_call, *k_content, *k_tool_calls, *k_id, *k_type, *k_function, *k_name,
    *k_arguments;

static int
offset_of(PyTypeObject *type, const char *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != Py_T_OBJECT_EX || (member->flags & Py_READONLY)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot", type->tp_name, name);
        return -1;
    }
    *out = member->offset;
    return 0;
}

static int
take_type(PyObject *kwargs, const char *key, PyTypeObject **out)
{
    PyObject *value = PyDict_GetItemString(kwargs, key); /* borrowed */
    if (value == NULL || !PyType_Check(value)) {
        PyErr_Format(PyExc_TypeError, "bind() needs the class %s", key);
        return -1;
    }
    Py_INCREF(value);
    *out = (PyTypeObject *)value;
    return 0;
}

static int
take_object(PyObject *kwargs, const char *key, PyObject **out)
{
    PyObject *value = PyDict_GetItemString(kwargs, key);
    if (value == NULL) {
        PyErr_Format(PyExc_TypeError, "bind() needs %s", key);
        return -1;
    }
    Py_INCREF(value);
    *out = value;
    return 0;
}

static int
intern(PyObject **out, const char *text)
{
    *out = PyUnicode_InternFromString(text);
    return *out == NULL ? -1 : 0;
}

static PyObject *
bind_scanner(PyObject *module, PyObject *cls)
{
    if (scanner_bound) {
        Py_RETURN_NONE;
    }
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind_scanner(JSONScanner)");
        return NULL;
    }
    T_Scanner = (PyTypeObject *)Py_NewRef(cls);
    if (offset_of(T_Scanner, "_escape", &o_s_escape) ||
        offset_of(T_Scanner, "_hex_left", &o_s_hex_left) ||
        offset_of(T_Scanner, "_in_string", &o_s_in_string) ||
        offset_of(T_Scanner, "_stack", &o_s_stack) ||
        offset_of(T_Scanner, "complete", &o_s_complete) ||
        offset_of(T_Scanner, "complete_at", &o_s_complete_at) ||
        offset_of(T_Scanner, "error", &o_s_error) ||
        offset_of(T_Scanner, "error_at", &o_s_error_at) ||
        offset_of(T_Scanner, "offset", &o_s_offset) || intern(&s_closer_brace, "}") ||
        intern(&s_closer_bracket, "]")) {
        Py_CLEAR(T_Scanner);
        return NULL;
    }
    scanner_bound = 1;
    Py_RETURN_NONE;
}

static PyObject *
bind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    if (bound) {
        Py_RETURN_NONE;
    }
    if (kwargs == NULL || PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "bind() takes keyword arguments only");
        return NULL;
    }
    PyObject *batch;
    if (!scanner_bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind_scanner() first");
        return NULL;
    }
    if (take_type(kwargs, "Choice", &T_Choice) ||
        take_type(kwargs, "CallTable", &T_Table) || take_type(kwargs, "ToolCall", &T_Call) ||
        take_type(kwargs, "CallMetrics", &T_Metrics) || take_type(kwargs, "Chain", &T_Chain) ||
        take_type(kwargs, "ChatCompletionChunk", &T_Chunk) ||
        take_type(kwargs, "SdkChoice", &T_SdkChoice) || take_type(kwargs, "ChoiceDelta", &T_Delta) ||
        take_type(kwargs, "ChoiceDeltaToolCall", &T_Entry) ||
        take_type(kwargs, "ChoiceDeltaToolCallFunction", &T_Function) ||
        take_object(kwargs, "fallback", &fallback_take) ||
        take_type(kwargs, "ContentDelta", &T_ContentDelta) ||
        take_type(kwargs, "ArgumentsDelta", &T_ArgumentsDelta) ||
        take_object(kwargs, "ArgumentsComplete", &ArgumentsComplete) ||
        take_object(kwargs, "ArgumentsMalformed", &ArgumentsMalformed) ||
        take_object(kwargs, "none", &empty_tuple) || take_object(kwargs, "batch", &batch)) {
        return NULL;
    }
    batch_size = PyLong_AsSsize_t(batch);
    Py_DECREF(batch);
    if (batch_size < 1 || !PyTuple_CheckExact(empty_tuple) || PyTuple_GET_SIZE(empty_tuple) != 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "bind(): batch must be positive, none an empty tuple");
        }
        return NULL;
    }
    if (offset_of(T_Choice, "content", &o_c_content) ||
        offset_of(T_Choice, "finish_reason", &o_c_finish_reason) ||
        offset_of(T_Choice, "table", &o_c_table) ||
        offset_of(T_Table, "by_index", &o_t_by_index) || offset_of(T_Table, "chains", &o_t_chains) ||
        offset_of(T_Chain, "last", &o_chain_last) || offset_of(T_Call, "_fast", &o_k_fast) ||
        offset_of(T_Call, "_bytes_left", &o_k_bytes_left) || offset_of(T_Call, "_slot", &o_k_slot) ||
        offset_of(T_Call, "_chars", &o_k_chars) || offset_of(T_Call, "_metrics", &o_k_metrics) ||
        offset_of(T_Call, "_parts", &o_k_parts) || offset_of(T_Call, "_done", &o_k_done) ||
        offset_of(T_Call, "_joined", &o_k_joined) ||
        offset_of(T_Call, "_scanner", &o_k_scanner) ||
        offset_of(T_Metrics, "fragments", &o_m_fragments) ||
        offset_of(T_Metrics, "bytes", &o_m_bytes) ||
        offset_of(T_Metrics, "first_argument_at", &o_m_first_argument_at) ||
        offset_of(T_Metrics, "arguments_complete_at", &o_m_arguments_complete_at) ||
        offset_of(T_ContentDelta, "choice", &o_e_content_choice) ||
        offset_of(T_ContentDelta, "text", &o_e_content_text) ||
        offset_of(T_ArgumentsDelta, "call", &o_e_arguments_call) ||
        offset_of(T_ArgumentsDelta, "text", &o_e_arguments_text)) {
        return NULL;
    }
    if (intern(&empty_str, "") || intern(&n_pydantic_extra, "__pydantic_extra__") ||
        intern(&n_envelope_unset, "_envelope_unset") || intern(&n_choices, "_choices") ||
        intern(&n_bytes_left, "_bytes_left") || intern(&n_clock, "_clock") ||
        intern(&k_usage, "usage") || intern(&k_choices, "choices") || intern(&k_index, "index") ||
        intern(&k_finish_reason, "finish_reason") || intern(&k_logprobs, "logprobs") ||
        intern(&k_delta, "delta") || intern(&k_role, "role") || intern(&k_refusal, "refusal") ||
        intern(&k_function_call, "function_call") || intern(&k_content, "content") ||
        intern(&k_tool_calls, "tool_calls") || intern(&k_id, "id") || intern(&k_type, "type") ||
        intern(&k_function, "function") || intern(&k_name, "name") ||
        intern(&k_arguments, "arguments")) {
        return NULL;
    }
    bound = 1;
    Py_RETURN_NONE;
}

/* -- small helpers ---------------------------------------------------------------------------- */

/* A slot holding an exact int that fits a machine word: 0 and the value in *out; else -1, with
 * no exception set (the caller declines). */
static int
small_int(PyObject *value, Py_ssize_t *out)
{
    if (value == NULL || !PyLong_CheckExact(value)) {
        return -1;
    }
    Py_ssize_t n = PyLong_AsSsize_t(value);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    /* Leave room for the sums below (sizes are at most a string's length). */
    if (n > PY_SSIZE_T_MAX / 4 || n < -(PY_SSIZE_T_MAX / 4)) {
        return -1;
    }
    *out = n;
    return 0;
}

/* Replace a slot's value with a new reference (stolen); -1 when value is NULL (an error). */
static inline int
set_slot(PyObject *obj, Py_ssize_t off, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = value;
    Py_XDECREF(old);
    return 0;
}

static inline int
set_slot_int(PyObject *obj, Py_ssize_t off, Py_ssize_t n)
{
    return set_slot(obj, off, PyLong_FromSsize_t(n));
}

static inline int
set_slot_bool(PyObject *obj, Py_ssize_t off, int flag)
{
    return set_slot(obj, off, Py_NewRef(flag ? Py_True : Py_False));
}

/* UTF-8 length of a str. strict: a lone surrogate answers -1 (the text is refused); otherwise
 * a surrogate counts as its 3-byte "surrogatepass" encoding. */
static Py_ssize_t
utf8_size(PyObject *text, int strict)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        return n;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            size += 1;
        }
        else if (c < 0x800) {
            size += 2;
        }
        else if (c < 0x10000) {
            if (strict && c >= 0xD800 && c <= 0xDFFF) {
                return -1;
            }
            size += 3;
        }
        else {
            size += 4;
        }
    }
    return size;
}

/* -- the scanner: JSONScanner.feed ------------------------------------------------------------ */

static int
is_hex(Py_UCS4 c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The scanner fails at `at` with `message` (a new reference): error, error_at, complete=False. */
static int
scanner_fail(PyObject *scanner, PyObject *message, Py_ssize_t at)
{
    if (message == NULL) {
        return -1;
    }
    if (set_slot(scanner, o_s_error, message) < 0 ||
        set_slot_int(scanner, o_s_error_at, at) < 0 ||
        set_slot_bool(scanner, o_s_complete, 0) < 0) {
        return -1;
    }
    return 0;
}

static int scan_text(PyObject *scanner, PyObject *text, PyObject *stack, Py_ssize_t base,
                     int in_string, int escape, int complete, Py_ssize_t hex_left);

/* Scan `text` exactly as JSONScanner.feed does. 1: done; 0: declined (nothing changed: the
 * scanner's state is not what this file reads, the Python method must run); -1: error. */
static int
scan(PyObject *scanner, PyObject *text)
{
    if (Py_TYPE(scanner) != T_Scanner || !PyUnicode_CheckExact(text)) {
        return 0;
    }
    PyObject *error = SLOT(scanner, o_s_error), *stack = SLOT(scanner, o_s_stack),
             *in_string_obj = SLOT(scanner, o_s_in_string), *escape_obj = SLOT(scanner, o_s_escape),
             *complete_obj = SLOT(scanner, o_s_complete);
    Py_ssize_t offset, hex_left;
    if (error == NULL || stack == NULL || !PyList_CheckExact(stack) || in_string_obj == NULL ||
        !PyBool_Check(in_string_obj) || escape_obj == NULL || !PyBool_Check(escape_obj) ||
        complete_obj == NULL || !PyBool_Check(complete_obj) ||
        small_int(SLOT(scanner, o_s_offset), &offset) < 0 ||
        small_int(SLOT(scanner, o_s_hex_left), &hex_left) < 0 || hex_left < 0 || hex_left > 4) {
        return 0;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (error != Py_None || n == 0) {
        return set_slot_int(scanner, o_s_offset, offset + n) < 0 ? -1 : 1;
    }
    Py_ssize_t base = offset;
    if (set_slot_int(scanner, o_s_offset, offset + n) < 0) {
        return -1;
    }
    /* Held until the end: replacing an old slot value below may run a __del__ that replaces the
     * scanner's stack. */
    Py_INCREF(stack);
    int status = scan_text(scanner, text, stack, base, in_string_obj == Py_True,
                           escape_obj == Py_True, complete_obj == Py_True, hex_left);
    Py_DECREF(stack);
    return status;
}

/* scan()'s loop, over a scanner whose state was checked. */
static int
scan_text(PyObject *scanner, PyObject *text, PyObject *stack, Py_ssize_t base, int in_string,
          int escape, int complete, Py_ssize_t hex_left)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int was_in_string = in_string, was_escape = escape;
    Py_ssize_t was_hex_left = hex_left;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t i = 0;
    int status = 1;
    while (i < n) {
        if (in_string) {
            if (hex_left) {
                Py_ssize_t take = hex_left < n - i ? hex_left : n - i;
                for (Py_ssize_t j = i; j < i + take; j++) {
                    if (!is_hex(PyUnicode_READ(kind, data, j))) {
                        if (scanner_fail(scanner,
                                         PyUnicode_FromString("invalid \\u escape in a string"),
                                         base + j) < 0) {
                            return -1;
                        }
                        goto done;
                    }
                }
                hex_left -= take;
                i += take;
                continue;
            }
            if (escape) {
                Py_UCS4 c = PyUnicode_READ(kind, data, i);
                escape = 0;
                if (c == 'u') {
                    hex_left = 4;
                }
                else if (!(c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' ||
                           c == 'n' || c == 'r' || c == 't')) {
                    PyObject *one = PyUnicode_Substring(text, i, i + 1);
                    if (one == NULL) {
                        return -1;
                    }
                    PyObject *message = PyUnicode_FromFormat("invalid escape \\%U in a string", one);
                    Py_DECREF(one);
                    if (scanner_fail(scanner, message, base + i) < 0) {
                        return -1;
                    }
                    goto done;
                }
                i += 1;
                continue;
            }
            /* _STRING_SPECIAL: the closing quote, an escape, or a raw control character */
            while (i < n) {
                Py_UCS4 c = PyUnicode_READ(kind, data, i);
                if (c == '"' || c == '\\' || c < 0x20) {
                    break;
                }
                i++;
            }
            if (i == n) {
                goto done;
            }
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            i++;
            if (c == '"') {
                in_string = 0;
            }
            else if (c == '\\') {
                escape = 1;
            }
            else {
                if (scanner_fail(scanner,
                                 PyUnicode_FromString("raw control character inside a string"),
                                 base + i - 1) < 0) {
                    return -1;
                }
                goto done;
            }
        }
        else if (complete) {
            for (; i < n; i++) {
                Py_UCS4 c = PyUnicode_READ(kind, data, i);
                if (!(c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
                    if (scanner_fail(scanner,
                                     PyUnicode_FromString("text after the complete JSON value"),
                                     base + i) < 0) {
                        return -1;
                    }
                    complete = 0;
                    goto done;
                }
            }
            goto done;
        }
        else if (PyList_GET_SIZE(stack) == 0) {
            for (; i < n; i++) {
                Py_UCS4 c = PyUnicode_READ(kind, data, i);
                if (!(c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
                    break;
                }
            }
            if (i == n) {
                goto done;
            }
            if (PyUnicode_READ(kind, data, i) != '{') {
                if (scanner_fail(scanner,
                                 PyUnicode_FromString(
                                     "arguments must be a JSON object starting with '{'"),
                                 base + i) < 0) {
                    return -1;
                }
                goto done;
            }
            if (PyList_Append(stack, s_closer_brace) < 0) {
                return -1;
            }
            i++;
        }
        else {
            /* _STRUCTURAL: {}[]" */
            Py_UCS4 c = 0;
            while (i < n) {
                c = PyUnicode_READ(kind, data, i);
                if (c == '{' || c == '}' || c == '[' || c == ']' || c == '"') {
                    break;
                }
                i++;
            }
            if (i == n) {
                goto done;
            }
            i++;
            if (c == '"') {
                in_string = 1;
            }
            else if (c == '{' || c == '[') {
                if (PyList_Append(stack, c == '{' ? s_closer_brace : s_closer_bracket) < 0) {
                    return -1;
                }
            }
            else {
                Py_ssize_t top_at = PyList_GET_SIZE(stack) - 1;
                PyObject *top = PyList_GET_ITEM(stack, top_at);
                PyObject *got = c == '}' ? s_closer_brace : s_closer_bracket;
                int differs;
                if (top == s_closer_brace || top == s_closer_bracket) {
                    differs = top != got;
                }
                else { /* not what this scanner pushes: compared as Python compares it */
                    Py_INCREF(top);
                    differs = PyObject_RichCompareBool(got, top, Py_NE);
                    if (differs < 0) {
                        Py_DECREF(top);
                        return -1;
                    }
                }
                if (differs) {
                    PyObject *message = PyUnicode_FromFormat("unexpected %R; expected %R", got, top);
                    if (top != s_closer_brace && top != s_closer_bracket) {
                        Py_DECREF(top);
                    }
                    if (scanner_fail(scanner, message, base + i - 1) < 0) {
                        return -1;
                    }
                    goto done;
                }
                if (top != s_closer_brace && top != s_closer_bracket) {
                    Py_DECREF(top);
                }
                if (PyList_SetSlice(stack, top_at, top_at + 1, NULL) < 0) {
                    return -1;
                }
                if (top_at == 0) {
                    complete = 1;
                    if (set_slot_bool(scanner, o_s_complete, 1) < 0 ||
                        set_slot_int(scanner, o_s_complete_at, base + i) < 0) {
                        return -1;
                    }
                }
            }
        }
    }
done:
    if (in_string != was_in_string && set_slot_bool(scanner, o_s_in_string, in_string) < 0) {
        return -1;
    }
    if (escape != was_escape && set_slot_bool(scanner, o_s_escape, escape) < 0) {
        return -1;
    }
    if (hex_left != was_hex_left && set_slot_int(scanner, o_s_hex_left, hex_left) < 0) {
        return -1;
    }
    return status;
}

static PyObject *
scan_feed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan(scanner, text)");
        return NULL;
    }
    if (!scanner_bound) {
        Py_RETURN_FALSE;
    }
    int done = scan(args[0], args[1]);
    if (done < 0) {
        return NULL;
    }
    return Py_NewRef(done ? Py_True : Py_False);
}

/* -- the fast path: take_common_chunk ----------------------------------------------------------- */

/* What the Python fast path does with an exception raised while it decides: KeyError, TypeError
 * and ValueError mean "not the common shape" (None); anything else is raised (the accumulator then
 * refuses every open call). */
static PyObject *
decline_or_raise(void)
{
    if (PyErr_ExceptionMatches(PyExc_KeyError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
        PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return NULL;
}

/* ``obj.__pydantic_extra__`` is falsy: 1; truthy: 0; -1 on error. */
static int
no_extra(PyObject *obj)
{
    PyObject *extra = PyObject_GetAttr(obj, n_pydantic_extra);
    if (extra == NULL) {
        return -1;
    }
    int truth;
    if (extra == Py_None) {
        truth = 0;
    }
    else if (PyDict_CheckExact(extra)) {
        truth = PyDict_GET_SIZE(extra) != 0;
    }
    else {
        truth = PyObject_IsTrue(extra);
    }
    Py_DECREF(extra);
    return truth < 0 ? -1 : !truth;
}

/* The model's __dict__ (a new reference), or NULL with an exception. */
static PyObject *
fields_of(PyObject *obj)
{
    PyObject *fields = PyObject_GenericGetDict(obj, NULL);
    if (fields != NULL && !PyDict_CheckExact(fields)) {
        Py_DECREF(fields);
        PyErr_SetString(PyExc_TypeError, "__dict__ is not a dict");
        return NULL;
    }
    return fields;
}

/* text.lstrip().startswith("{") */
static int
starts_with_brace(PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!Py_UNICODE_ISSPACE(c)) {
            return c == '{';
        }
    }
    return 0;
}

/* push(): append, and join the newest _BATCH pieces once the list is longer than that. */
static int
push(PyObject *parts, PyObject *text)
{
    if (PyList_Append(parts, text) < 0) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(parts);
    if (n > batch_size) {
        PyObject *tail = PyList_GetSlice(parts, n - batch_size, n);
        if (tail == NULL) {
            return -1;
        }
        PyObject *joined = PyUnicode_Join(empty_str, tail);
        Py_DECREF(tail);
        if (joined == NULL) {
            return -1;
        }
        int failed = PyList_SetSlice(parts, n - batch_size, n, NULL) < 0 ||
                     PyList_Append(parts, joined) < 0;
        Py_DECREF(joined);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

/* An event of two fields built as object.__new__ and the slots' setters build it (the frozen
 * dataclass's __init__ is what it skips, as _events.content_delta / arguments_delta do). */
static PyObject *
new_event(PyTypeObject *type, Py_ssize_t off1, PyObject *v1, Py_ssize_t off2, PyObject *v2)
{
    PyObject *event = type->tp_alloc(type, 0);
    if (event == NULL) {
        return NULL;
    }
    SLOT(event, off1) = Py_NewRef(v1);
    SLOT(event, off2) = Py_NewRef(v2);
    return event;
}

static PyObject *
events_of(PyObject *said, PyObject *delta, PyObject *closed)
{
    /* (said?, delta?, closed?) without the missing ones; steals the references */
    PyObject *items[3];
    int count = 0;
    if (said != NULL) {
        items[count++] = said;
    }
    if (delta != NULL) {
        items[count++] = delta;
    }
    if (closed != NULL) {
        items[count++] = closed;
    }
    if (count == 0) {
        return Py_NewRef(empty_tuple);
    }
    PyObject *out = PyTuple_New(count);
    if (out == NULL) {
        for (int k = 0; k < count; k++) {
            Py_DECREF(items[k]);
        }
        return NULL;
    }
    for (int k = 0; k < count; k++) {
        PyTuple_SET_ITEM(out, k, items[k]);
    }
    return out;
}

/* Everything decided about one SDK chunk before anything changes. Every object here is held (a
 * strong reference, in Held) until the chunk is done: Python code that runs meanwhile (a hostile
 * __hash__ or __bool__ in a chunk, the caller's clock) cannot free what is still used. */
typedef struct {
    PyObject *state, *index, *content, *call, *text, *chains, *chain, *slot, *metrics, *scanner;
    Py_ssize_t content_size, size, acc_left, call_left, chars, fragments, metric_bytes;
} Decision;

#define HELD_MAX 48
typedef struct {
    PyObject *items[HELD_MAX];
    int count;
} Held;

/* Keep `value` (a borrowed reference) alive until release(); returns it. */
static inline PyObject *
keep(Held *held, PyObject *value)
{
    if (value != NULL) {
        Py_INCREF(value);
        held->items[held->count++] = value;
    }
    return value;
}

/* Take ownership of a new reference (NULL passes through). */
static inline PyObject *
own(Held *held, PyObject *value)
{
    if (value != NULL) {
        held->items[held->count++] = value;
    }
    return value;
}

static void
release(Held *held)
{
    for (int k = 0; k < held->count; k++) {
        Py_DECREF(held->items[k]);
    }
    held->count = 0;
}

/* fields[key], kept; NULL with KeyError set when missing (the Python fast path's itemgetter). */
static PyObject *
field(Held *held, PyObject *fields, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(fields, key);
    if (value == NULL && !PyErr_Occurred()) {
        PyErr_SetObject(PyExc_KeyError, key);
    }
    return keep(held, value);
}

/* A slot's value, kept; NULL (no exception) when unset. */
static inline PyObject *
slot(Held *held, PyObject *obj, Py_ssize_t off)
{
    return keep(held, SLOT(obj, off));
}

/* An SDK model of exactly `type` with no extra fields: 1 with its __dict__ (held) in *fields;
 * 0 when it is not the common shape; -1 with an exception. */
static int
model_fields(Held *held, PyObject *obj, PyTypeObject *type, PyObject **fields)
{
    if (Py_TYPE(obj) != type) {
        return 0;
    }
    int ok = no_extra(obj);
    if (ok <= 0) {
        return ok;
    }
    *fields = own(held, fields_of(obj));
    return *fields == NULL ? -1 : 1;
}

/* 1: the common shape (d filled); 0: declined; -1: an exception to raise. Exceptions the
 * Python fast path turns into None are turned into 0 here too. */
static int
decide(PyObject *acc, PyObject *chunk, Decision *d, Held *held)
{
#define DECLINE_ON_ERROR                                                                           \
    do {                                                                                           \
        PyObject *r_ = decline_or_raise();                                                         \
        if (r_ == NULL) {                                                                          \
            return -1;                                                                             \
        }                                                                                          \
        Py_DECREF(r_);                                                                             \
        return 0;                                                                                  \
    } while (0)
    PyObject *fields, *cfields, *dfields, *efields, *ffields;
    int ok = model_fields(held, chunk, T_Chunk, &fields);
    if (ok <= 0) {
        return ok; /* raised (outside the Python path's try) or not the common shape */
    }
    PyObject *usage = field(held, fields, k_usage), *choices;
    if (usage == NULL || (choices = field(held, fields, k_choices)) == NULL) {
        DECLINE_ON_ERROR;
    }
    if (usage != Py_None || !PyList_CheckExact(choices) || PyList_GET_SIZE(choices) != 1) {
        return 0;
    }
    PyObject *choice = keep(held, PyList_GET_ITEM(choices, 0));
    /* Envelope fields not kept yet must be None in this chunk (as acc._envelope_nones reads). */
    PyObject *unset = own(held, PyObject_GetAttr(acc, n_envelope_unset));
    if (unset == NULL) {
        DECLINE_ON_ERROR;
    }
    if (!PyTuple_CheckExact(unset)) {
        return 0;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(unset); k++) {
        PyObject *value = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(unset, k));
        if (value == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetObject(PyExc_KeyError, PyTuple_GET_ITEM(unset, k));
            }
            DECLINE_ON_ERROR;
        }
        if (value != Py_None) {
            return 0;
        }
    }
    /* (a choice's own extra fields are not checked: the Python fast path does not either) */
    if (Py_TYPE(choice) != T_SdkChoice) {
        return 0;
    }
    if ((cfields = own(held, fields_of(choice))) == NULL) {
        DECLINE_ON_ERROR;
    }
    PyObject *index = field(held, cfields, k_index), *finish = NULL, *logprobs = NULL, *delta = NULL;
    if (index == NULL || (finish = field(held, cfields, k_finish_reason)) == NULL ||
        (logprobs = field(held, cfields, k_logprobs)) == NULL ||
        (delta = field(held, cfields, k_delta)) == NULL) {
        DECLINE_ON_ERROR;
    }
    if (finish != Py_None || logprobs != Py_None) {
        return 0;
    }
    if ((ok = model_fields(held, delta, T_Delta, &dfields)) < 0) {
        DECLINE_ON_ERROR;
    }
    if (!ok) {
        return 0;
    }
    PyObject *choices_of_acc = own(held, PyObject_GetAttr(acc, n_choices));
    if (choices_of_acc == NULL) {
        DECLINE_ON_ERROR;
    }
    if (!PyDict_CheckExact(choices_of_acc)) {
        return 0;
    }
    PyObject *state = keep(held, PyDict_GetItemWithError(choices_of_acc, index));
    if (state == NULL && PyErr_Occurred()) {
        DECLINE_ON_ERROR;
    }
    PyObject *role = field(held, dfields, k_role), *refusal = NULL, *function_call = NULL,
             *content = NULL, *tool_calls = NULL;
    if (role == NULL || (refusal = field(held, dfields, k_refusal)) == NULL ||
        (function_call = field(held, dfields, k_function_call)) == NULL ||
        (content = field(held, dfields, k_content)) == NULL ||
        (tool_calls = field(held, dfields, k_tool_calls)) == NULL) {
        DECLINE_ON_ERROR;
    }
    if (state == NULL || role != Py_None || refusal != Py_None || function_call != Py_None) {
        return 0;
    }
    if (Py_TYPE(state) != T_Choice) {
        return 0;
    }
    PyObject *table = slot(held, state, o_c_table);
    if (table == NULL || Py_TYPE(table) != T_Table) {
        return 0;
    }
    PyObject *call = NULL, *text = empty_str;
    if (tool_calls != Py_None) {
        if (!PyList_CheckExact(tool_calls)) {
            return 0;
        }
        if (PyList_GET_SIZE(tool_calls) != 0) {
            if (PyList_GET_SIZE(tool_calls) != 1) {
                return 0;
            }
            PyObject *entry = keep(held, PyList_GET_ITEM(tool_calls, 0));
            if ((ok = model_fields(held, entry, T_Entry, &efields)) < 0) {
                DECLINE_ON_ERROR;
            }
            if (!ok) {
                return 0;
            }
            PyObject *call_id = field(held, efields, k_id), *call_type = NULL, *call_index = NULL,
                     *function = NULL;
            if (call_id == NULL || (call_type = field(held, efields, k_type)) == NULL ||
                (call_index = field(held, efields, k_index)) == NULL ||
                (function = field(held, efields, k_function)) == NULL) {
                DECLINE_ON_ERROR;
            }
            if (call_id != Py_None || call_type != Py_None) {
                return 0;
            }
            if ((ok = model_fields(held, function, T_Function, &ffields)) < 0) {
                DECLINE_ON_ERROR;
            }
            if (!ok) {
                return 0;
            }
            PyObject *name = field(held, ffields, k_name);
            if (name == NULL || (text = field(held, ffields, k_arguments)) == NULL) {
                DECLINE_ON_ERROR;
            }
            if (!PyLong_CheckExact(call_index)) {
                return 0;
            }
            PyObject *by_index = slot(held, table, o_t_by_index);
            if (by_index == NULL || !PyDict_CheckExact(by_index)) {
                return 0;
            }
            call = keep(held, PyDict_GetItemWithError(by_index, call_index));
            if (call == NULL) {
                if (PyErr_Occurred()) {
                    DECLINE_ON_ERROR;
                }
                return 0;
            }
            if (name != Py_None || !PyUnicode_CheckExact(text) || Py_TYPE(call) != T_Call ||
                SLOT(call, o_k_fast) != Py_True) {
                return 0;
            }
        }
    }
    if (content != Py_None) {
        if (!PyUnicode_CheckExact(content)) {
            return 0;
        }
        if (PyUnicode_GET_LENGTH(content) != 0) {
            PyObject *finish_reason = SLOT(state, o_c_finish_reason);
            if (finish_reason == NULL || finish_reason != Py_None) {
                return 0;
            }
        }
    }
    d->content_size = 0;
    d->size = 0;
    d->chain = NULL;
    d->chains = NULL;
    d->metrics = NULL;
    if (content != Py_None && PyUnicode_GET_LENGTH(content) != 0) {
        d->content_size = utf8_size(content, 0);
        PyObject *parts = SLOT(state, o_c_content);
        if (parts == NULL || !PyList_CheckExact(parts)) {
            return 0;
        }
    }
    if (call != NULL) {
        PyObject *metrics = slot(held, call, o_k_metrics);
        if (metrics == NULL || Py_TYPE(metrics) != T_Metrics ||
            small_int(SLOT(metrics, o_m_fragments), &d->fragments) < 0) {
            return 0;
        }
        d->metrics = metrics;
    }
    if (PyUnicode_GET_LENGTH(text) != 0) {
        d->size = utf8_size(text, 1);
        if (d->size < 0) {
            return 0; /* a lone surrogate: the general path refuses the text */
        }
        PyObject *metrics = d->metrics, *scanner = slot(held, call, o_k_scanner),
                 *call_slot = slot(held, call, o_k_slot), *chains = slot(held, table, o_t_chains);
        PyObject *parts = SLOT(call, o_k_parts), *done = SLOT(call, o_k_done);
        if (small_int(SLOT(call, o_k_bytes_left), &d->call_left) < 0 || d->call_left < d->size ||
            small_int(SLOT(call, o_k_chars), &d->chars) < 0 ||
            small_int(SLOT(metrics, o_m_bytes), &d->metric_bytes) < 0 || scanner == NULL ||
            Py_TYPE(scanner) != T_Scanner || parts == NULL || !PyList_CheckExact(parts) ||
            done == NULL || !PyList_CheckExact(done) || call_slot == NULL ||
            !PyLong_CheckExact(call_slot) || SLOT(metrics, o_m_first_argument_at) == NULL ||
            SLOT(call, o_k_joined) == NULL || SLOT(metrics, o_m_arguments_complete_at) == NULL ||
            chains == NULL || !PyDict_CheckExact(chains)) {
            return 0;
        }
        d->scanner = scanner;
        d->slot = call_slot;
        d->chains = chains;
        if (PyDict_GET_SIZE(chains) != 0) {
            PyObject *chain = keep(held, PyDict_GetItemWithError(chains, call_slot));
            if (chain == NULL && PyErr_Occurred()) {
                DECLINE_ON_ERROR;
            }
            if (chain != NULL) {
                PyObject *last;
                if (Py_TYPE(chain) != T_Chain || (last = slot(held, chain, o_chain_last)) == NULL ||
                    !PyUnicode_CheckExact(last)) {
                    return 0;
                }
                Py_ssize_t n_last = PyUnicode_GET_LENGTH(last);
                if (PyUnicode_GET_LENGTH(text) >= n_last) {
                    Py_ssize_t match = PyUnicode_Tailmatch(text, last, 0, n_last, -1);
                    if (match < 0) {
                        DECLINE_ON_ERROR;
                    }
                    if (match && starts_with_brace(text)) {
                        return 0;
                    }
                }
                d->chain = chain;
            }
        }
    }
    PyObject *acc_left = own(held, PyObject_GetAttr(acc, n_bytes_left));
    if (acc_left == NULL) {
        DECLINE_ON_ERROR;
    }
    if (small_int(acc_left, &d->acc_left) < 0 || d->content_size + d->size > d->acc_left) {
        return 0;
    }
    d->state = state;
    d->index = index;
    d->content = content;
    d->call = call;
    d->text = text;
    return 1;
#undef DECLINE_ON_ERROR
}

/* A slot that must hold a list (checked again here: the caller's clock, which runs between the
 * decision and the writes, may have replaced it); NULL with an exception otherwise. */
static PyObject *
list_slot(PyObject *obj, Py_ssize_t off)
{
    PyObject *value = SLOT(obj, off);
    if (value == NULL || !PyList_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "a list slot changed while a chunk was taken");
        return NULL;
    }
    return value;
}

static int
set_int_attr(PyObject *obj, PyObject *name, Py_ssize_t n)
{
    PyObject *value = PyLong_FromSsize_t(n);
    if (value == NULL) {
        return -1;
    }
    int failed = PyObject_SetAttr(obj, name, value);
    Py_DECREF(value);
    return failed;
}

/* acc._clock(), a new reference. */
static PyObject *
clock_of(PyObject *acc)
{
    PyObject *clock = PyObject_GetAttr(acc, n_clock);
    if (clock == NULL) {
        return NULL;
    }
    PyObject *t = PyObject_CallNoArgs(clock);
    Py_DECREF(clock);
    return t;
}

/* The same writes as the Python fast path, in the same order. A failure here (memory, or a
 * caller's clock that raised or changed what was decided) leaves the accumulator half-written:
 * the exception reaches Accumulator._fast_fault, which refuses every open call. */
static PyObject *
apply(PyObject *acc, Decision *d, int want_events)
{
    PyObject *said = NULL, *delta = NULL, *closed = NULL;
    PyObject *content = d->content, *text = d->text, *call = d->call;
    if (content != Py_None && PyUnicode_GET_LENGTH(content) != 0) {
        d->acc_left -= d->content_size;
        PyObject *parts;
        if (set_int_attr(acc, n_bytes_left, d->acc_left) < 0 ||
            (parts = list_slot(d->state, o_c_content)) == NULL || push(parts, content) < 0) {
            return NULL;
        }
        if (want_events) {
            said = new_event(T_ContentDelta, o_e_content_choice, d->index, o_e_content_text,
                             content);
            if (said == NULL) {
                return NULL;
            }
        }
    }
    if (call == NULL || PyUnicode_GET_LENGTH(text) == 0) {
        if (call != NULL && set_slot_int(d->metrics, o_m_fragments, d->fragments + 1) < 0) {
            Py_XDECREF(said);
            return NULL;
        }
        return events_of(said, NULL, NULL);
    }
    PyObject *metrics = d->metrics, *scanner = d->scanner, *parts, *done;
    if (set_slot_int(metrics, o_m_fragments, d->fragments + 1) < 0) {
        goto fail;
    }
    if (d->chain != NULL) {
        if (PyDict_DelItem(d->chains, d->slot) < 0) {
            goto fail;
        }
    }
    else if (d->chars == 0) {
        PyObject *chain = PyObject_CallOneArg((PyObject *)T_Chain, text);
        if (chain == NULL) {
            goto fail;
        }
        int failed = PyDict_SetItem(d->chains, d->slot, chain);
        Py_DECREF(chain);
        if (failed < 0) {
            goto fail;
        }
    }
    if (SLOT(metrics, o_m_first_argument_at) == Py_None &&
        set_slot(metrics, o_m_first_argument_at, clock_of(acc)) < 0) {
        goto fail;
    }
    if (set_int_attr(acc, n_bytes_left, d->acc_left - d->size) < 0 ||
        set_slot_int(metrics, o_m_bytes, d->metric_bytes + d->size) < 0 ||
        set_slot_int(call, o_k_bytes_left, d->call_left - d->size) < 0 ||
        (parts = list_slot(call, o_k_parts)) == NULL || PyList_Append(parts, text) < 0) {
        goto fail;
    }
    if (PyList_GET_SIZE(parts) >= batch_size) {
        PyObject *joined = PyUnicode_Join(empty_str, parts);
        if (joined == NULL) {
            goto fail;
        }
        int failed = (done = list_slot(call, o_k_done)) == NULL || PyList_Append(done, joined) < 0;
        Py_DECREF(joined);
        if (failed || PyList_SetSlice(parts, 0, PyList_GET_SIZE(parts), NULL) < 0) {
            goto fail;
        }
    }
    if (set_slot(call, o_k_joined, Py_NewRef(Py_None)) < 0 ||
        set_slot_int(call, o_k_chars, d->chars + PyUnicode_GET_LENGTH(text)) < 0) {
        goto fail;
    }
    /* The scanner reads the text (declined: its state is not what scan() reads, and the Python
     * method does it). */
    int scanned = scan(scanner, text);
    if (scanned < 0) {
        goto fail;
    }
    if (scanned == 0) {
        PyObject *r = PyObject_CallMethod(scanner, "feed", "O", text);
        if (r == NULL) {
            goto fail;
        }
        Py_DECREF(r);
    }
    PyObject *complete = SLOT(scanner, o_s_complete), *error = SLOT(scanner, o_s_error);
    int is_complete = 0, has_error = error != NULL && error != Py_None;
    if (complete != NULL && (is_complete = PyObject_IsTrue(complete)) < 0) {
        goto fail;
    }
    if (is_complete || has_error) {
        if (set_slot_bool(call, o_k_fast, 0) < 0) {
            goto fail;
        }
        if (is_complete && set_slot(metrics, o_m_arguments_complete_at, clock_of(acc)) < 0) {
            goto fail;
        }
        if (!want_events) {
            return Py_NewRef(empty_tuple);
        }
        if (is_complete) {
            closed = PyObject_CallOneArg(ArgumentsComplete, call);
        }
        else {
            /* re-read: the clock ran since */
            error = SLOT(scanner, o_s_error);
            PyObject *at = SLOT(scanner, o_s_error_at);
            int truth = error == NULL ? 0 : PyObject_IsTrue(error);
            if (truth < 0) {
                goto fail;
            }
            closed = PyObject_CallFunctionObjArgs(ArgumentsMalformed, call,
                                                  truth ? error : empty_str,
                                                  at == NULL ? Py_None : at, NULL);
        }
        if (closed == NULL) {
            goto fail;
        }
    }
    else if (!want_events) {
        return Py_NewRef(empty_tuple);
    }
    delta = new_event(T_ArgumentsDelta, o_e_arguments_call, call, o_e_arguments_text, text);
    if (delta == NULL) {
        goto fail;
    }
    return events_of(said, delta, closed);
fail:
    Py_XDECREF(said);
    Py_XDECREF(closed);
    return NULL;
}

static PyObject *
take(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "take(acc, chunk, want_events)");
        return NULL;
    }
    PyObject *acc = args[0], *chunk = args[1];
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "toolstitch.core._speedups.bind() was not called");
        return NULL;
    }
    if (Py_TYPE(chunk) != T_Chunk) {
        return PyObject_Vectorcall(fallback_take, args, 3, NULL);
    }
    int want_events = PyObject_IsTrue(args[2]);
    if (want_events < 0) {
        return NULL;
    }
    Held held;
    held.count = 0;
    Decision d = {0};
    int decided = decide(acc, chunk, &d, &held);
    PyObject *result;
    if (decided < 0) {
        result = NULL;
    }
    else if (decided == 0) {
        result = Py_NewRef(Py_None);
    }
    else {
        result = apply(acc, &d, want_events);
    }
    release(&held);
    return result;
}

static PyMethodDef methods[] = {
    {"bind_scanner", (PyCFunction)bind_scanner, METH_O,
     "Resolve JSONScanner's slots (once, at import): scan() works from then on."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "Resolve the classes and slots the other functions read (once, at import)."},
    {"scan", (PyCFunction)(void (*)(void))scan_feed, METH_FASTCALL,
     "scan(scanner, text) -> bool: JSONScanner.feed done here (True), or declined (False)."},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL,
     "take(acc, chunk, want_events): take_common_chunk, compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "toolstitch.core._speedups",
    "Compiled twins of JSONScanner.feed and take_common_chunk (see _speedups.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module_def);
}
