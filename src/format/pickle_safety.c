/* Which GLOBALs no checkpoint loader should ever call.
 *
 * Conservative by design: a false alarm costs a refused file, a miss costs
 * code execution.  Rules, checked on (module, name) as written in the
 * pickle (protocol 2 spells builtins "__builtin__"):
 *   1. whole modules that run processes, touch files or sockets, import or
 *      evaluate code, or reach arbitrary attributes (os, subprocess, sys,
 *      importlib, operator, types, pickle, ...), submodules included;
 *   2. builtins: everything except a list of plain types and constants;
 *   3. names that are dangerous in any module (eval, exec, system, load,
 *      open, getattr, __import__, ...);
 *   4. dotted names (protocol 4 resolves "a.b.c" with getattr): any part
 *      that is a dunder, a dangerous name or a dangerous module;
 *   5. torch and numpy functions that load, save or compile.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ckptfs/pickle.h"
#include "pickle_int.h"

static const char *const bad_modules[] = {
	"os", "posix", "nt", "posixpath", "ntpath", "sys", "subprocess", "_posixsubprocess",
	"_winapi", "msvcrt", "shutil", "socket", "_socket", "ssl", "select", "selectors",
	"pty", "tty", "termios", "fcntl", "resource", "signal", "mmap", "ctypes", "_ctypes",
	"cffi", "importlib", "imp", "zipimport", "pkgutil", "runpy", "code", "codeop",
	"compileall", "py_compile", "marshal", "pickle", "_pickle", "cPickle", "pickletools",
	"shelve", "dbm", "dill", "cloudpickle", "joblib", "jsonpickle", "yaml",
	"webbrowser", "antigravity", "multiprocessing", "_multiprocessing", "concurrent",
	"threading", "_thread", "thread", "asyncio", "sched", "atexit", "gc", "inspect",
	"types", "operator", "_operator", "functools", "_functools", "ast", "dis",
	"timeit", "trace", "tracemalloc", "pdb", "bdb", "profile", "cProfile", "doctest",
	"unittest", "platform", "sysconfig", "site", "distutils", "setuptools", "pip",
	"ensurepip", "venv", "io", "_io", "tempfile", "glob", "fileinput", "zipfile",
	"tarfile", "gzip", "bz2", "lzma", "zlib", "http", "urllib", "urllib2", "httplib",
	"ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver",
	"requests", "commands", "popen2", "getpass", "readline", "rlcompleter", "tkinter",
	"turtle", "idlelib", "_sqlite3", "sqlite3", "logging",
	"torch.hub", "torch.package", "torch.jit", "torch.utils.cpp_extension",
	"torch.distributed.rpc", "torch.ops", "torch.classes", "torch._C", "torch._dynamo",
	"torch._inductor", "torch.compiler", "torch.cuda.memory", "torch.multiprocessing",
	"numpy.f2py", "numpy.distutils", "numpy.ctypeslib", "numpy.testing", "numpy.lib.npyio",
	"numpy.lib.format",
};

/* Builtins that only construct plain values. */
static const char *const safe_builtins[] = {
	"set", "frozenset", "bytes", "bytearray", "complex", "slice", "range", "xrange",
	"int", "long", "float", "str", "unicode", "basestring", "list", "dict", "tuple",
	"bool", "object", "Ellipsis", "NotImplemented", "None", "True", "False",
	"ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "Exception",
};

/* Dangerous as the last (or any dotted) part of a name in any module. */
static const char *const bad_names[] = {
	"eval", "exec", "execfile", "compile", "system", "popen", "popen2", "popen3", "popen4",
	"spawn", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
	"spawnvpe", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp",
	"execvpe", "fork", "forkpty", "kill", "startfile", "Popen", "call", "check_call",
	"check_output", "getoutput", "getstatusoutput", "run", "run_path", "run_module",
	"__import__", "import_module", "reload", "getattr", "setattr", "delattr",
	"attrgetter", "methodcaller", "globals", "locals", "vars", "breakpoint", "input",
	"raw_input", "open", "file", "load", "loads", "_load", "load_all", "unsafe_load",
	"full_load", "from_file", "fromfile", "memmap", "save", "savez", "savez_compressed",
	"savetxt", "tofile", "remove", "unlink", "rmdir", "rmtree", "rename", "chmod",
	"chown", "write", "writelines", "write_text", "write_bytes", "mkdir", "makedirs",
	"symlink", "link", "connect", "urlopen", "urlretrieve", "help", "exit", "quit",
	"_load_from_bytes", "_legacy_load", "apply", "partial",
};

static int in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return 1;
	return 0;
}

#define IN(s, list) in_list(s, list, sizeof(list) / sizeof(list[0]))

/* module is m or a submodule of m */
static int under(const char *module, const char *m)
{
	size_t n = strlen(m);

	return !strncmp(module, m, n) && (module[n] == '\0' || module[n] == '.');
}

static int module_is_bad(const char *module)
{
	for (size_t i = 0; i < sizeof(bad_modules) / sizeof(bad_modules[0]); i++)
		if (under(module, bad_modules[i]))
			return 1;
	return 0;
}

static int is_dunder(const char *s, size_t n)
{
	return n >= 4 && s[0] == '_' && s[1] == '_' && s[n - 1] == '_' && s[n - 2] == '_';
}

/* Checks one part of a dotted name; part is not NUL-terminated. */
static int part_is_bad(const char *part, size_t n)
{
	char buf[64];

	if (!n)
		return 1;    /* "a..b" or a trailing dot: nothing legitimate */
	if (is_dunder(part, n))
		return 1;
	if (n >= sizeof(buf))
		return 0;
	memcpy(buf, part, n);
	buf[n] = '\0';
	return IN(buf, bad_names) || module_is_bad(buf) || !strcmp(buf, "builtins") ||
	       !strcmp(buf, "__builtin__") || !strcmp(buf, "__builtins__");
}

static int torch_is_bad(const char *module, const char *name)
{
	if (!strcmp(module, "torch"))
		return !strcmp(name, "load") || !strcmp(name, "save") || !strcmp(name, "from_file");
	if (under(module, "torch.serialization"))
		return strcmp(name, "_get_layout") != 0;
	if (under(module, "torch.storage"))
		return strncmp(name, "_load", 5) == 0;
	return 0;
}

int pk_global_is_dangerous(const char *module, const char *name)
{
	const char *dot;

	if (!module || !name || !*module || !*name)
		return 1;
	if (module_is_bad(module) || torch_is_bad(module, name))
		return 1;
	if (!strcmp(module, "builtins") || !strcmp(module, "__builtin__") ||
	    !strcmp(module, "__builtins__"))
		return !IN(name, safe_builtins);
	if (strchr(name, '.')) {
		/* Protocol 4 walks the parts with getattr. */
		for (const char *part = name; part; part = dot ? dot + 1 : NULL) {
			dot = strchr(part, '.');
			if (part_is_bad(part, dot ? (size_t)(dot - part) : strlen(part)))
				return 1;
		}
		return 0;
	}
	/* A single dunder name reaches interpreter internals ("__builtins__",
	 * "__globals__"); copyreg's constructors are the legitimate ones. */
	if (is_dunder(name, strlen(name)))
		return !(!strcmp(module, "copyreg") &&
			 (!strcmp(name, "__newobj__") || !strcmp(name, "__newobj_ex__")));
	return IN(name, bad_names);
}

int pk_is_getattr(const struct pk_node *n)
{
	return n && n->kind == PK_GLOBAL && !strcmp(n->v.global.name, "getattr") &&
	       (!strcmp(n->v.global.module, "builtins") || !strcmp(n->v.global.module, "__builtin__"));
}

/* getattr(<GLOBAL class>, 'NAME'): the class itself must be harmless, and so
 * must the attribute as a name of it (no dunders, nothing that rules 3-5
 * flag).  This is how Python >= 3.11 pickles an Enum member. */
int pk_getattr_is_member_lookup(const struct pk_node *args)
{
	const struct pk_node *cls, *attr;
	char owner[512];
	int len;

	if (!args || args->kind != PK_TUPLE || args->n != 2)
		return 0;
	cls = args->items[0];
	attr = args->items[1];
	if (cls->kind != PK_GLOBAL || attr->kind != PK_STR || !attr->v.str.len || attr->v.str.s[0] == '_' ||
	    memchr(attr->v.str.s, '.', attr->v.str.len) || strlen(attr->v.str.s) != attr->v.str.len)
		return 0;
	if (pk_global_is_dangerous(cls->v.global.module, cls->v.global.name))
		return 0;
	len = snprintf(owner, sizeof(owner), "%s.%s", cls->v.global.module, cls->v.global.name);
	if (len < 0 || (size_t)len >= sizeof(owner))
		return 0;
	return !pk_global_is_dangerous(owner, attr->v.str.s);
}

int pk_doc_dangerous_global(const struct pk_doc *doc, const struct pk_node **out)
{
	size_t n = pk_doc_nglobals(doc);

	for (size_t i = 0; i < n; i++) {
		const struct pk_node *g = pk_doc_global(doc, i);

		if (pk_is_getattr(g) && doc->getattr_pushes == doc->getattr_member_calls)
			continue;
		if (pk_global_is_dangerous(g->v.global.module, g->v.global.name)) {
			*out = g;
			return 1;
		}
	}
	return 0;
}
