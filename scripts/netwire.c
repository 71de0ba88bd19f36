/* netwire — the switch of scripts/netns-hosts.sh when its links need a latency and the
 * kernel has no netem qdisc: a learning Ethernet switch in user space whose every port
 * adds the same one-way delay.
 *
 *   netwire --delay-us D [--queue-mb M] [--ready FILE] PORT...
 *
 * Run inside the switch's network namespace; each PORT is the switch's end of one
 * host's veth link (no bridge on them). A frame that arrives on a port is sent out D
 * microseconds later on the port its destination address was last seen on as a source
 * (on every other port for broadcast, multicast and addresses not seen yet). Frames
 * cross through AF_PACKET sockets with virtio-net headers, so TCP's large segments
 * (GSO) and offloaded checksums go through as they came. Frames are sent in the order
 * they arrived; beyond M MiB waiting (default 64) new ones are dropped, as a full
 * switch buffer would. Bandwidth is not this program's business: tc tbf on the hosts'
 * ends caps it (netns-hosts.sh).
 *
 * --ready FILE: created once every port is open (the script waits for it).
 * Ends on SIGTERM or SIGINT with exit 0 and one line of counts on stdout; exit 1 with one
 * line on stderr when a port cannot be opened. Linux only; needs CAP_NET_RAW. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

enum { MAX_PORTS = 16, MAX_MACS = 256, FRAME_CAP = 262144 };
#define HDR ((size_t)sizeof(struct virtio_net_hdr))

typedef struct frame {
    struct frame *next;
    int64_t due_ns;
    int in_port;
    size_t len; /* virtio-net header + Ethernet frame */
    unsigned char data[];
} frame;

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* An AF_PACKET socket on one interface, with virtio-net headers; -1 (reported). */
static int open_port(const char *name)
{
    const unsigned idx = if_nametoindex(name);
    if (idx == 0) {
        fprintf(stderr, "netwire: no interface %s here: %s\n", name, strerror(errno));
        return -1;
    }
    /* Protocol 0: nothing is received until bind names the interface. */
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "netwire: packet socket: %s\n", strerror(errno));
        return -1;
    }
    const int one = 1, bufsize = 8 << 20;
    struct sockaddr_ll sll = {.sll_family = AF_PACKET,
                              .sll_protocol = htons(ETH_P_ALL),
                              .sll_ifindex = (int)idx};
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0) {
        fprintf(stderr, "netwire: port %s: %s\n", name, strerror(errno));
        close(fd);
        return -1;
    }
    /* Our own sends are not arrivals (older kernels: checked per frame below). */
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof bufsize) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof bufsize) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    return fd;
}

typedef struct {
    unsigned char mac[6];
    int port;
} mac_entry;

typedef struct {
    int n_ports, fd[MAX_PORTS];
    mac_entry macs[MAX_MACS];
    int n_macs;
    frame *head, *tail;
    size_t queued, queue_cap;
    unsigned long long in, out, dropped;
} wire;

static void learn(wire *w, const unsigned char *src, int port)
{
    if (src[0] & 1) return; /* a group address is never a source */
    for (int i = 0; i < w->n_macs; i++)
        if (memcmp(w->macs[i].mac, src, 6) == 0) {
            w->macs[i].port = port;
            return;
        }
    if (w->n_macs == MAX_MACS) w->n_macs = 0; /* forget all; relearnt at once */
    memcpy(w->macs[w->n_macs].mac, src, 6);
    w->macs[w->n_macs++].port = port;
}

static int port_of(const wire *w, const unsigned char *dst)
{
    if (dst[0] & 1) return -1;
    for (int i = 0; i < w->n_macs; i++)
        if (memcmp(w->macs[i].mac, dst, 6) == 0) return w->macs[i].port;
    return -1;
}

static void send_to(wire *w, int port, const frame *f)
{
    if (send(w->fd[port], f->data, f->len, 0) < 0)
        w->dropped++; /* the port's queue is full, or it went away */
    else
        w->out++;
}

/* Sends every frame whose time has come. */
static void release(wire *w, int64_t now)
{
    while (w->head && w->head->due_ns <= now) {
        frame *f = w->head;
        w->head = f->next;
        if (!w->head) w->tail = NULL;
        w->queued -= f->len;
        const int to = port_of(w, f->data + HDR);
        if (to >= 0) {
            if (to != f->in_port) send_to(w, to, f);
        } else {
            for (int p = 0; p < w->n_ports; p++)
                if (p != f->in_port) send_to(w, p, f);
        }
        free(f);
    }
}

/* Takes every frame waiting on a port into the queue, due `delay_ns` from now. */
static void receive(wire *w, int port, unsigned char *buf, int64_t delay_ns)
{
    for (;;) {
        struct sockaddr_ll from;
        socklen_t fl = sizeof from;
        const ssize_t n = recvfrom(w->fd[port], buf, FRAME_CAP, MSG_TRUNC,
                                   (struct sockaddr *)&from, &fl);
        if (n < 0) return; /* EAGAIN: drained */
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        if ((size_t)n > FRAME_CAP || (size_t)n < HDR + 14) {
            w->dropped++;
            continue;
        }
        w->in++;
        learn(w, buf + HDR + 6, port);
        if (w->queued + (size_t)n > w->queue_cap) {
            w->dropped++;
            continue;
        }
        frame *f = malloc(sizeof *f + (size_t)n);
        if (!f) {
            w->dropped++;
            continue;
        }
        memcpy(f->data, buf, (size_t)n);
        f->len = (size_t)n;
        f->in_port = port;
        f->due_ns = now_ns() + delay_ns;
        f->next = NULL;
        if (w->tail)
            w->tail->next = f;
        else
            w->head = f;
        w->tail = f;
        w->queued += (size_t)n;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: netwire --delay-us D [--queue-mb M] [--ready FILE] PORT...\n");
}

int main(int argc, char **argv)
{
    static wire w;
    double delay_us = -1, queue_mb = 64;
    const char *ready = NULL;
    const char *ports[MAX_PORTS];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--delay-us") == 0 && i + 1 < argc) {
            delay_us = atof(argv[++i]);
        } else if (strcmp(argv[i], "--queue-mb") == 0 && i + 1 < argc) {
            queue_mb = atof(argv[++i]);
        } else if (strcmp(argv[i], "--ready") == 0 && i + 1 < argc) {
            ready = argv[++i];
        } else if (argv[i][0] == '-' || n == MAX_PORTS) {
            usage();
            return 2;
        } else {
            ports[n++] = argv[i];
        }
    }
    if (delay_us < 0 || delay_us > 10e6 || !(queue_mb > 0) || n < 2) {
        usage();
        return 2;
    }
    w.queue_cap = (size_t)(queue_mb * 1048576.0);
    for (int i = 0; i < n; i++) {
        w.fd[i] = open_port(ports[i]);
        if (w.fd[i] < 0) return 1;
        w.n_ports++;
    }
    unsigned char *buf = malloc(FRAME_CAP);
    if (!buf) {
        fprintf(stderr, "netwire: out of memory\n");
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* wake within a microsecond of due */
    if (ready) {
        const int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
    }
    const int64_t delay_ns = (int64_t)(delay_us * 1000.0);
    struct pollfd pfd[MAX_PORTS];
    for (int i = 0; i < n; i++) pfd[i] = (struct pollfd){.fd = w.fd[i], .events = POLLIN};
    while (!stop) {
        const int64_t now = now_ns();
        release(&w, now);
        struct timespec ts, *tsp = NULL;
        if (w.head) {
            const int64_t wait = w.head->due_ns - now > 0 ? w.head->due_ns - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000);
            ts.tv_nsec = (long)(wait % 1000000000);
            tsp = &ts;
        }
        if (ppoll(pfd, (nfds_t)n, tsp, NULL) < 0 && errno != EINTR) {
            fprintf(stderr, "netwire: poll: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++)
            if (pfd[i].revents & POLLIN) receive(&w, i, buf, delay_ns);
    }
    printf("netwire: %llu frames in, %llu out, %llu dropped\n", w.in, w.out, w.dropped);
    return 0;
}
