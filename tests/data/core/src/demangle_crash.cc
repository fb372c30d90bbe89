// A null write under frames whose names are hard to spell: dependent calls in decltype (which the C++
// runtime's __cxa_demangle spells unlike gdb), a lambda in an anonymous namespace, an operator, std::string
// and std::ostream in signatures (abbreviated in the mangling), a variadic template and an ABI tag.
#include <iostream>
#include <string>
#include <utility>

int *volatile target = nullptr;

namespace ns {
struct S {
    template <class T> [[gnu::noinline]] static T get() { *target = 1; return T(); }
};
template <class T> [[gnu::noinline]] T make() { return S::get<T>(); }
}  // namespace ns

template <class T> [[gnu::noinline]] auto by_member(T) -> decltype(T::template get<int>()) {
    return T::template get<int>();
}
template <class T> [[gnu::noinline]] auto by_path(T) -> decltype(ns::S::get<T>()) { return by_member(ns::S()); }
template <class T> [[gnu::noinline]] auto by_call(T) -> decltype(ns::make<T>()) { return by_path(T()); }

struct Point {
    int x;
    [[gnu::noinline]] Point operator+(const Point &other) const { return {x + other.x + by_call(0)}; }
};

template <class... Args> [[gnu::noinline]] int variadic(Args &&...args) { return (Point{1} + Point{sizeof...(args)}).x; }

[[gnu::noinline]] [[gnu::abi_tag("v2")]] int tagged(const std::string &text, std::ostream &out) {
    out << text.size();
    return variadic(text, 1, 2.0);
}

namespace {
[[gnu::noinline]] int run() {
    auto step = [](const std::string &text) { return tagged(text, std::cout); };
    return step(std::string("job"));
}
}  // namespace

int main() { return run(); }
