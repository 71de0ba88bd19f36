#!/usr/bin/perl
# translate.pl — turns a CUDA source into C++ that a host compiler builds against
# cuda_emu.h (see there): reads the .cu file named on the command line, writes the
# translation to standard output. Three constructs need rewriting:
#   kernel<targs><<<grid, block[, smem[, stream]]>>>(args);
#     -> emu::launch(emu::config(grid, block, smem, stream), "kernel",
#                    [=]() { kernel<targs>(args); });
#   extern __shared__ T name[];
#     -> T *name = (T *)emu::dynamic_shared();
#   __shared__ T a[N][M], s;    (static shared memory, one per block)
#     -> static char site; T (&a)[N][M] = *(T (*)[N][M])emu::static_shared(&site, ...);
#        and the same for s: each block gets the launch's copy of it, poisoned (0xff
#        bytes) before the block starts, so a read before a write shows as NaN.
# A launch left untranslated (a form this does not know) is an error, not a silent
# miscompile. A #line directive keeps the compiler's messages on the original file.
use strict;
use warnings;

my $path = shift @ARGV or die "usage: translate.pl FILE.cu\n";
open my $in, '<', $path or die "translate.pl: $path: $!\n";
local $/;
my $src = <$in>;
close $in;

my $launches = () = $src =~ /<<</g;

# A template argument list, with nested <...> and parentheses (decltype(v)::value).
my $targs = qr/(?<targs><(?:[^<>;{}]|(?&targs))*>)/;
my $done = 0;
$src =~ s{
    \b([A-Za-z_]\w*(?:\s*$targs)?)   # the kernel, with its template arguments
    \s*<<<(.*?)>>>                   # the launch configuration
    \s*\((.*?)\)\s*;                 # the arguments, up to the first ");"
}{
    $done++;
    my ($whole, $kernel, $cfg, $args) = ($&, $1, $3, $4);
    $kernel =~ s/\s+/ /g;
    my ($name) = $kernel =~ /^(\w+)/;
    my $out = "emu::launch(emu::config($cfg), \"$name\", [=]() { $kernel($args); });";
    # Keep the line count: the newlines the rewrite dropped go after the statement.
    my $nl = (() = $whole =~ /\n/g) - (() = $out =~ /\n/g);
    $out . ("\n" x $nl)
}gsex;
die "translate.pl: $path: $launches launches, $done translated\n" if $done != $launches;

$src =~ s{extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;}
         {$1 *$2 = ($1 *)emu::dynamic_shared();}g;
die "translate.pl: $path: an extern __shared__ declaration this does not know\n"
    if $src =~ /extern\s+__shared__/;

# Static shared declarations: `__shared__ T d1, d2;`, each declarator a name with
# optional [extents]. One line in, one line out.
my $site = 0;
$src =~ s{__shared__\s+(\w+)\s+([^;{}()]+);}{
    my ($type, $list) = ($1, $2);
    my @out;
    for my $d (split /,/, $list) {
        $d =~ /^\s*(\w+)\s*((?:\[[^\]]+\]\s*)*)$/
            or die "translate.pl: $path: a __shared__ declarator this does not know: $d\n";
        my ($name, $ext) = ($1, $2);
        $ext =~ s/\s+$//;
        $site++;
        my $ref = $ext eq '' ? "$type &$name" : "$type (&$name)$ext";
        my $ptr = $ext eq '' ? "$type *" : "$type (*)$ext";
        push @out, "static char emu_site_$site; $ref = *($ptr)emu::static_shared(&emu_site_$site, "
            . "sizeof($type$ext));";
    }
    join ' ', @out
}ge;
die "translate.pl: $path: a __shared__ declaration this does not know\n"
    if $src =~ /__shared__/;

print "#line 1 \"$path\"\n", $src;
