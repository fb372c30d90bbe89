/* Calls into libcrash.so, which writes through NULL three frames down. */
#include <stddef.h>
void lib_a(int *p);
int main(void) { lib_a(NULL); return 0; }
