#!/usr/bin/perl
# A perl workload whose activities are known by construction, for bench/truth/run.py: each drives
# one part of perl or one XS library (Digest::SHA, Compress::Zlib, POSIX) for a CPU budget measured
# in user CPU time (times(), 10 ms ticks), in a random order or a fixed cycle; writes
# {"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"} lines to the truth file (that
# user time, and the wall clock: truth_score.place_truth puts the wall-clock stamps on the windows'
# clock, as for nodework.js).
#   perlwork.pl TRUTH ACTIVITIES(comma) random|cycle SECONDS SEED
use strict; use warnings;
use Digest::SHA qw(sha256); use Compress::Zlib; use POSIX qw(floor); use Time::HiRes ();
my ($truth, $acts, $order, $seconds, $seed) = @ARGV;
srand($seed);
my $data = join("", map { chr(int(rand(256))) } 1 .. 200000) . ("perl phases " x 20000);
my @words = map { join("", map { chr(97 + int(rand(26))) } 1 .. 8) } 1 .. 50000;
my $text = join(" ", @words);
my %work = (
    sha     => sub { sha256($data) },
    deflate => sub { compress($data) },
    regex   => sub { my $n = () = $text =~ /\b([aeiou]\w{2,4})([^aeiou\s]+)\b/g },
    sort    => sub { my @s = sort @words },
    hash    => sub { my %h; $h{$_}++ for @words; scalar keys %h },
    sprintf => sub { my $s = ""; $s .= sprintf("%08.3f|%x|%s\n", $_ * 1.5, $_, "x") for 1 .. 20000 },
    math    => sub { my $x = 0; $x += sin($_) * floor(sqrt($_)) for 1 .. 50000; $x },
);
my @names = split /,/, $acts;
my %budget = map { $_ => 0.6 + rand(2.4) } @names;
sub user_ns { my ($u) = times; return int($u * 1e9) }
sub wall_ns { return int(Time::HiRes::time() * 1e9) }
open(my $out, ">", $truth) or die;
my ($start, $i, $last) = (user_ns(), 0, "");
while (user_ns() - $start < $seconds * 1e9) {
    my ($name, $b);
    if ($order eq "cycle") { $name = $names[$i % @names]; $b = $budget{$name} }
    else { my @c = grep { $_ ne $last } @names; $name = $c[int(rand(@c))]; $b = 0.6 + rand(2.4) }
    my ($t0, $w0) = (user_ns(), wall_ns());
    $work{$name}->() while user_ns() - $t0 < $b * 1e9;
    printf $out "{\"activity\": \"%s\", \"start_ns\": %d, \"end_ns\": %d, \"start_wall_ns\": %d, \"end_wall_ns\": %d}\n",
        $name, $t0, user_ns(), $w0, wall_ns();
    $last = $name; $i++;
}
close $out;
