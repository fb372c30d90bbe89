// A C++ exception nobody catches: std::terminate, then abort().
#include <stdexcept>
namespace job { [[gnu::noinline]] void step(int n) { if (n > 2) throw std::runtime_error("bad step"); step(n + 1); } }
int main() { job::step(0); return 0; }
