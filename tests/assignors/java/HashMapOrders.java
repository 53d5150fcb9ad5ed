// Prints the iteration order of java.util.HashMap after sequences of operations, for the test
// data in tests/assignors/hashmap_cases.json (see make_hashmap_cases.py next to this file).
//
// Input, one case per line: KIND CAPACITY OP...  where KIND is S (String keys) or I (Integer
// keys), CAPACITY the initial capacity (new HashMap<>(CAPACITY)), and each OP is +key (put),
// *key (computeIfAbsent) or -key (remove); a lone | records the keys in iteration order so far.
// Output, one line per case: the recorded orders, separated by " | ", keys separated by spaces.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class HashMapOrders {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            boolean ints = f[0].equals("I");
            Map<Object, Boolean> map = new HashMap<>(Integer.parseInt(f[1]));
            List<String> shots = new ArrayList<>();
            for (int i = 2; i < f.length; i++) {
                if (f[i].equals("|")) {
                    StringBuilder sb = new StringBuilder();
                    for (Object k : map.keySet()) {
                        if (sb.length() > 0) sb.append(' ');
                        sb.append(k);
                    }
                    shots.add(sb.toString());
                    continue;
                }
                char op = f[i].charAt(0);
                String s = f[i].substring(1);
                Object key = ints ? (Object) Integer.valueOf(s) : s;
                if (op == '+') map.put(key, Boolean.TRUE);
                else if (op == '*') map.computeIfAbsent(key, k -> Boolean.TRUE);
                else if (op == '-') map.remove(key);
                else throw new IllegalArgumentException("bad op " + f[i]);
            }
            System.out.println(String.join(" | ", shots));
        }
    }
}
