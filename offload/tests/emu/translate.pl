#!/usr/bin/perl
# translate.pl — turns a CUDA source into C++ that a host compiler builds against
# cuda_emu.h (see there): reads the .cu file named on the command line, writes the
# translation to standard output. Only two constructs need rewriting:
#   kernel<targs><<<grid, block[, smem[, stream]]>>>(args);
#     -> emu::launch(emu::config(grid, block, smem, stream), [=]() { kernel<targs>(args); });
#   extern __shared__ T name[];
#     -> T *name = (T *)emu::dynamic_shared();
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
    my $out = "emu::launch(emu::config($cfg), [=]() { $kernel($args); });";
    # Keep the line count: the newlines the rewrite dropped go after the statement.
    my $nl = (() = $whole =~ /\n/g) - (() = $out =~ /\n/g);
    $out . ("\n" x $nl)
}gsex;
die "translate.pl: $path: $launches launches, $done translated\n" if $done != $launches;

$src =~ s{extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;}
         {$1 *$2 = ($1 *)emu::dynamic_shared();}g;
die "translate.pl: $path: an extern __shared__ declaration this does not know\n"
    if $src =~ /extern\s+__shared__/;

print "#line 1 \"$path\"\n", $src;
