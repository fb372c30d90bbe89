/* Three calls deep inside a shared library, then a NULL write. */
#include <stddef.h>
void lib_c(int *p) { *p = 42; }
void lib_b(int *p) { lib_c(p); }
void lib_a(int *p) { lib_b(p); }
