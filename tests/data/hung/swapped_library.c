/* Maps libmarker.so (linked with an rpath), then swaps the name it was mapped by: the file is deleted (the
   mapping stays, and /proc/PID/maps names the old path, "(deleted)"; a rename would carry the mapping's name
   along), its folder too when argv[2] names that folder, and a symbolic link to argv[3] is made at argv[2].
   Prints "ready" on stdout, then blocks in the library's function, whose name is on the stack.
   argv: the library's path, the name to swap (that path or its folder), the link's target. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int public_marker_fn(int fd);

int main(int argc, char **argv)
{
    int fds[2];
    if (argc != 4 || pipe(fds) != 0)
        return 2;
    if (unlink(argv[1]) != 0 || (strcmp(argv[1], argv[2]) != 0 && rmdir(argv[2]) != 0)
        || symlink(argv[3], argv[2]) != 0) {
        perror("swap");
        return 1;
    }
    puts("ready");
    fflush(stdout);
    return public_marker_fn(fds[0]); /* HANG main */
}
