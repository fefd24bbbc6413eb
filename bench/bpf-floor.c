/* SPDX-License-Identifier: MIT */
/* bench/bpf-overhead helper: load and attach a BPF object's programs (or only the one named) with
 * run-time statistics on, wait for stdin to close, then print each program's run count and run time as
 * JSON lines. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct bpf_object *obj;
        struct bpf_program *p;
        char buf[64];
        int stats_fd;

        if (argc < 2 || argc > 3) {
                fprintf(stderr, "usage: bpf-floor OBJECT.bpf.o [PROGRAM]\n");
                return 2;
        }
        obj = bpf_object__open_file(argv[1], NULL);
        if (!obj) {
                fprintf(stderr, "bpf-floor: cannot open %s\n", argv[1]);
                return 1;
        }
        if (argc == 3)
                bpf_object__for_each_program(p, obj)
                        (void) bpf_program__set_autoload(p, strcmp(bpf_program__name(p), argv[2]) == 0);
        if (bpf_object__load(obj) < 0) {
                fprintf(stderr, "bpf-floor: cannot load %s\n", argv[1]);
                return 1;
        }
        bpf_object__for_each_program(p, obj)
                if (bpf_program__autoload(p) && !bpf_program__attach(p)) {
                        fprintf(stderr, "bpf-floor: cannot attach %s\n", bpf_program__name(p));
                        return 1;
                }
        stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
        if (stats_fd < 0) {
                perror("bpf-floor: bpf_enable_stats");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        while (read(STDIN_FILENO, buf, sizeof buf) > 0)
                ;
        bpf_object__for_each_program(p, obj) {
                struct bpf_prog_info info = {};
                if (!bpf_program__autoload(p))
                        continue;
                __u32 len = sizeof info;
                if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0)
                        printf("{\"name\": \"%s\", \"runs\": %llu, \"run_ns\": %llu, \"recursion_misses\": %llu}\n", bpf_program__name(p),
                               (unsigned long long) info.run_cnt, (unsigned long long) info.run_time_ns,
                               (unsigned long long) info.recursion_misses);
        }
        close(stats_fd);
        bpf_object__close(obj);
        return 0;
}
